package decode

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// captureSeeds reads the committed captures (../testdata) and returns, per
// connection, the first bytes of each direction, the complete request
// frames, and the re-encoded decoded responses with their key and version:
// real client bytes to seed the fuzzers.
type captureSeeds struct {
	streams   [][2][]byte
	requests  [][]byte
	responses []respSeed
}

type respSeed struct {
	key, version int16
	body         []byte
}

const maxSeedsPerKind = 200

func loadCaptureSeeds(tb testing.TB) *captureSeeds {
	files, _ := filepath.Glob("../testdata/*.pcapng")
	s := &captureSeeds{}
	for _, f := range files {
		src, err := capture.OpenFiles([]string{f}, nil)
		if err != nil {
			tb.Fatal(err)
		}
		streams := map[uint64]*[2][]byte{}
		sink := capture.SinkFunc(func(c *capture.Chunk) {
			if c.Kind != capture.Data {
				return
			}
			st := streams[c.Conn.ID]
			if st == nil {
				st = new([2][]byte)
				streams[c.Conn.ID] = st
			}
			if len(st[c.Dir]) < 4096 {
				st[c.Dir] = append(st[c.Dir], c.Data[:min(len(c.Data), 4096-len(st[c.Dir]))]...)
			}
		})
		d := New(&respCollector{s: s}, nil)
		tee := capture.SinkFunc(func(c *capture.Chunk) { sink(c); d.Chunk(c) })
		if err := src.Run(context.Background(), tee); err != nil {
			tb.Fatal(err)
		}
		for _, st := range streams {
			if len(s.streams) < maxSeedsPerKind {
				s.streams = append(s.streams, *st)
			}
			for p := st[capture.ToServer]; len(p) >= 4 && len(s.requests) < maxSeedsPerKind; {
				n := int(binary.BigEndian.Uint32(p))
				if n < 0 || 4+n > len(p) {
					break
				}
				s.requests = append(s.requests, p[4:4+n])
				p = p[4+n:]
			}
		}
	}
	return s
}

type respCollector struct{ s *captureSeeds }

func (r *respCollector) Exchange(e *Exchange) {
	if e.Resp == nil || len(r.s.responses) >= maxSeedsPerKind {
		return
	}
	r.s.responses = append(r.s.responses, respSeed{key: e.Key, version: e.Version, body: e.Resp.AppendTo(nil)})
}
func (r *respCollector) Anomaly(*Anomaly) {}

// seedFuzzers adds the capture seeds to f for the named target.
func seedFuzzers(f *testing.F, target string) {
	s := loadCaptureSeeds(f)
	switch target {
	case "framer":
		for i, st := range s.streams {
			f.Add(st[0], st[1], uint8(i), i%2 == 0)
		}
	case "request":
		for _, r := range s.requests {
			f.Add(r)
		}
	case "response":
		for _, r := range s.responses {
			// Flexible responses are decoded after their header tags.
			if proto := kmsg.RequestForKey(r.key); proto != nil {
				f.Add(r.key, r.version, r.body)
			}
		}
	}
}
