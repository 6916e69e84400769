package decode

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reqHeader is a parsed request header.
type reqHeader struct {
	key, version int16
	corr         int32
	clientID     []byte // aliases the frame
	body         int    // offset of the body in the frame
	known        bool   // kmsg knows the key and version: body decodable
}

// keyKnown reports whether kmsg has a request type for key.
func keyKnown(protos *[maxKey]kmsg.Request, key int16) kmsg.Request {
	if key < 0 || int(key) >= maxKey {
		return nil
	}
	return protos[key]
}

// parseRequestHeader parses the header at the start of frame (the bytes after
// the length prefix). ok is false when the header itself is malformed.
// Header v0 (key, version, correlation id) is used only by ControlledShutdown
// v0; v1 adds a nullable client id; v2 (flexible versions, KIP-482) adds
// tagged fields.
func parseRequestHeader(protos *[maxKey]kmsg.Request, tr *kbin.Reader, frame []byte) (h reqHeader, ok bool) {
	if len(frame) < 8 {
		return h, false
	}
	h.key = int16(binary.BigEndian.Uint16(frame))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.corr = int32(binary.BigEndian.Uint32(frame[4:]))
	h.body = 8
	proto := keyKnown(protos, h.key)
	if h.key == 7 && h.version == 0 { // ControlledShutdown v0: header v0
		h.known = proto != nil
		return h, true
	}
	if len(frame) < 10 {
		return h, false
	}
	n := int(int16(binary.BigEndian.Uint16(frame[8:])))
	h.body = 10
	if n >= 0 {
		if 10+n > len(frame) {
			return h, false
		}
		h.clientID = frame[10 : 10+n]
		h.body += n
	} else if n != -1 {
		return h, false
	}
	if proto == nil || h.version < 0 || h.version > proto.MaxVersion() {
		return h, true
	}
	h.known = true
	proto.SetVersion(h.version)
	if proto.IsFlexible() {
		*tr = kbin.Reader{Src: frame[h.body:]}
		kmsg.SkipTags(tr) // through an interface: tr is the caller's, so nothing escapes per call
		if !tr.Ok() {
			return h, false
		}
		h.body = len(frame) - len(tr.Src)
	}
	return h, true
}

// plausible reports whether h looks like a real request header: used to
// find frame boundaries when resynchronising, so it is strict.
func (h *reqHeader) plausible() bool {
	if !h.known || h.corr < 0 {
		return false
	}
	return printable(h.clientID)
}

// printable reports whether b is printable ASCII, as client ids are.
func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// isFlexibleResponse reports whether the response header for key/version
// carries tagged fields (header v1). ApiVersions responses never do, so that
// a client can always read the broker's answer (KIP-511).
func isFlexibleResponse(proto kmsg.Request, key, version int16) bool {
	if key == 18 || proto == nil {
		return false
	}
	proto.SetVersion(version)
	return proto.IsFlexible()
}
