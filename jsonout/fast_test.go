package jsonout

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/kwire/kwire/correlate"
)

// commitSlow is the commit line as encoding/json writes it.
func commitSlow(t testing.TB, e *correlate.CommitEvent) []byte {
	var b bytes.Buffer
	w := New(&b, nil)
	w.envelope(e.Type(), e.Time(), e)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var awkward = []string{"", "plain", `quote " and \ backslash`, "<html> & co", "ctl \x00\x01\b\f\n\r\t\x1f\x7f",
	"é ü 日本", "\u2028 and \u2029", "bad \xff\xfe utf-8 \xc3", "\xe2\x80", "emoji 🎉"}

// TestFastCommit checks the hand-written commit line against
// encoding/json, on awkward strings in every string field.
func TestFastCommit(t *testing.T) {
	shared := &commitCache{}
	for _, s := range awkward {
		meta := s
		for _, e := range []*correlate.CommitEvent{
			{Group: s, MemberID: s, Generation: -1, Topic: s, Partition: 7, Offset: -1, ErrorCode: -1, Outcome: s, ClientID: s, ClientHost: s,
				Conn: correlate.Conn{ID: 1 << 40, Client: s, Broker: s}},
			{Group: "g", MemberID: "m", Generation: 1 << 30, Topic: "t", Partition: -1, Offset: 1 << 62, Metadata: &meta,
				ErrorCode: 22, Error: s, Outcome: "rejected"},
			{Group: "g", Conn: correlate.Conn{ID: 3, Client: "c", Broker: "b", PID: 4242, Comm: s}},
		} {
			want := commitSlow(t, e)
			got := append(commitLine(nil, e, &commitCache{}), '\n')
			if !bytes.Equal(got, want) {
				t.Errorf("%q:\n got  %s\n want %s", s, got, want)
			}
			// The same cache for every line: a string that changes is
			// written anew, one that stays is written the same.
			for _, line := range [][]byte{commitLine(nil, e, shared), commitLine(nil, e, shared)} {
				if line = append(line, '\n'); !bytes.Equal(line, want) {
					t.Errorf("%q, cache shared with earlier lines:\n got  %s\n want %s", s, line, want)
				}
			}
		}
	}
}

// FuzzAppendString checks appendString and appendStringNoHTML against
// encoding/json on any string.
func FuzzAppendString(f *testing.F) {
	for _, s := range awkward {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		if got := appendStringNoHTML(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q without HTML escapes: got %s, want %s", s, got, want)
		}
	})
}

// TestTimeCache writes times through one tsCache, in an order that keeps
// and changes the second, and checks each against Time.
func TestTimeCache(t *testing.T) {
	base := time.Date(2026, 12, 2, 3, 48, 27, 999_999_999, time.UTC)
	var c tsCache
	for i, d := range []time.Duration{0, 0, 1, -999_999_999, 1500, -1, 1_000_000_000, 12345678901, -1 << 40, 1 << 50, 7} {
		at := base.Add(d)
		if i%3 == 0 {
			at = at.In(time.FixedZone("x", 3600))
		}
		if got, want := string(c.append(nil, at)), Time(at); got != want {
			t.Errorf("%v: got %s, want %s", at, got, want)
		}
	}
	for _, at := range []time.Time{time.Unix(0, 1), time.Unix(-1, 999_000), time.Date(12000, 1, 1, 0, 0, 0, 5000, time.UTC), time.Date(-5, 1, 1, 0, 0, 0, 5000, time.UTC)} {
		for _, d := range []time.Duration{0, time.Microsecond, 999 * time.Microsecond} {
			if got, want := string(c.append(nil, at.Add(d))), Time(at.Add(d)); got != want {
				t.Errorf("%v: got %s, want %s", at.Add(d), got, want)
			}
		}
	}
}
