package gen

import (
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrameSize bounds what the framer believes; a larger length prefix
// means the stream is not Kafka (or is corrupt) and framing stops.
const maxFrameSize = 1 << 30

// Frame is one length-prefixed Kafka frame found by walking the exact byte
// stream a tap relayed in one direction of one connection.
type Frame struct {
	// Offset is the stream offset of the 4-byte length prefix.
	Offset int64 `json:"offset"`
	// Size is the value of the length prefix: the frame occupies
	// [Offset, Offset+4+Size).
	Size int32 `json:"size"`
	// Key, Version and API are read from a request's header. A response
	// gets them from the request with the same correlation id on the
	// same connection; -1 and "" when there was none.
	Key     int16  `json:"key"`
	Version int16  `json:"version"`
	API     string `json:"api"`
	// CorrelationID is the first int32 of a response, the third field of
	// a request header.
	CorrelationID int32 `json:"correlation_id"`
	// ClientID is a request header's client id (request header v1+;
	// ids longer than 256 bytes are cut).
	ClientID string `json:"client_id,omitempty"`
	// Complete is false when the connection ended before all Size bytes
	// were relayed.
	Complete bool `json:"complete"`
	// Intact is true when every byte of the frame is in the capture file
	// (see Edit); always Complete && no byte left out.
	Intact bool `json:"intact"`
	// StartNanos and EndNanos are the Unix times of the packets carrying
	// the frame's first and last bytes.
	StartNanos int64 `json:"start_ns"`
	EndNanos   int64 `json:"end_ns"`
}

// End is the stream offset just past the frame.
func (f *Frame) End() int64 { return f.Offset + 4 + int64(f.Size) }

// framer walks length prefixes over one direction's bytes as they are fed.
type framer struct {
	dir    Dir
	off    int64 // stream offset of the next byte fed
	frames []Frame
	cur    *Frame // frame being filled, nil between frames
	lenBuf []byte // the current frame's length prefix, up to 4 bytes
	head   []byte // the first 8 bytes of the current frame's body
	remain int64  // body bytes still to come for cur
	broken bool   // an impossible length was seen: stop framing
}

func (f *framer) feed(b []byte, ts time.Time) {
	ns := ts.UnixNano()
	for len(b) > 0 && !f.broken {
		if f.cur == nil {
			f.cur = &Frame{Offset: f.off, StartNanos: ns, Key: -1, Version: -1}
			f.lenBuf, f.head = f.lenBuf[:0], f.head[:0]
		}
		f.cur.EndNanos = ns
		if len(f.lenBuf) < 4 {
			n := min(4-len(f.lenBuf), len(b))
			f.lenBuf = append(f.lenBuf, b[:n]...)
			f.off += int64(n)
			b = b[n:]
			if len(f.lenBuf) < 4 {
				continue
			}
			size := int32(binary.BigEndian.Uint32(f.lenBuf))
			if size < 0 || size > maxFrameSize {
				f.broken, f.cur = true, nil
				return
			}
			f.cur.Size, f.remain = size, int64(size)
			if size == 0 {
				f.finish()
			}
			continue
		}
		n := int(min(f.remain, int64(len(b))))
		if want := f.headLen(); len(f.head) < want {
			f.head = append(f.head, b[:min(n, want-len(f.head))]...)
		}
		f.remain -= int64(n)
		f.off += int64(n)
		b = b[n:]
		if f.remain == 0 {
			f.finish()
		}
	}
}

func (f *framer) finish() {
	fr := *f.cur
	fr.Complete = true
	switch f.dir {
	case ToServer:
		if len(f.head) >= 8 {
			fr.Key = int16(binary.BigEndian.Uint16(f.head[0:]))
			fr.Version = int16(binary.BigEndian.Uint16(f.head[2:]))
			fr.CorrelationID = int32(binary.BigEndian.Uint32(f.head[4:]))
			fr.API = kmsg.NameForKey(fr.Key)
			fr.ClientID = clientID(f.head[8:])
		}
	case ToClient:
		if len(f.head) >= 4 {
			fr.CorrelationID = int32(binary.BigEndian.Uint32(f.head[0:]))
		}
	}
	f.frames = append(f.frames, fr)
	f.cur = nil
}

// headLen is how much of a frame's body the framer keeps: a request's
// key, version, correlation id and client id; a response's correlation id.
func (f *framer) headLen() int {
	if f.dir == ToServer {
		return 8 + 2 + 256
	}
	return 4
}

// clientID reads the nullable string that follows the correlation id in
// request headers v1 and v2 (all requests but ControlledShutdown v0).
func clientID(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	n := int(int16(binary.BigEndian.Uint16(b)))
	if n <= 0 {
		return ""
	}
	return string(b[2:min(len(b), 2+n)])
}

// all returns the finished frames plus the one cut short, if any.
func (f *framer) all() []Frame {
	out := append([]Frame(nil), f.frames...)
	if f.cur != nil {
		out = append(out, *f.cur)
	}
	return out
}
