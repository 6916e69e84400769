package report

import (
	"testing"
	"time"

	"github.com/kwire/kwire/correlate"
)

func TestWiresharkFilter(t *testing.T) {
	for _, c := range []struct {
		name           string
		client, broker string
		want           string
	}{
		{"loopback", "127.0.0.1:47464", "127.0.0.1:9092",
			"ip.addr==127.0.0.1 && tcp.port==47464 && tcp.port==9092 && kafka.correlation_id==17"},
		{"two hosts", "10.0.0.5:51234", "10.0.0.9:9093",
			"ip.addr==10.0.0.5 && tcp.port==51234 && ip.addr==10.0.0.9 && tcp.port==9093 && kafka.correlation_id==17"},
		{"ipv6", "[fd00::5]:51234", "[fd00::9]:9092",
			"ipv6.addr==fd00::5 && tcp.port==51234 && ipv6.addr==fd00::9 && tcp.port==9092 && kafka.correlation_id==17"},
		{"v4-mapped", "[::ffff:10.0.0.5]:51234", "10.0.0.9:9092",
			"ip.addr==10.0.0.5 && tcp.port==51234 && ip.addr==10.0.0.9 && tcp.port==9092 && kafka.correlation_id==17"},
		{"no address (an agent record without a connection)", "", "", "kafka.correlation_id==17"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := wiresharkFilter(correlate.Conn{Client: c.client, Broker: c.broker}, 17); got != c.want {
				t.Errorf("(-want +got)\n-%s\n+%s", c.want, got)
			}
		})
	}
}

// TestRecorderSeries: a partition's offsets are sampled at most every
// minStep (less often as the capture grows), a sample that changes
// nothing adds no point, and a long capture keeps at most maxPoints, the
// last sample taken always (the report adds the state at the end).
func TestRecorderSeries(t *testing.T) {
	r := NewRecorder()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var committed, taken int64
	sample := func(at time.Time) {
		r.Sample(at, func(fn func(string, *correlate.Partition)) {
			c := committed
			taken = c
			fn("g", &correlate.Partition{Topic: "t", Partition: 0, Committed: &c})
		})
	}
	sample(t0)
	committed = 5
	sample(t0.Add(minStep / 2)) // too soon: not taken
	sample(t0.Add(minStep))
	sample(t0.Add(2 * minStep)) // unchanged: no point
	s := r.series[seriesKey{"g", "t", 0}]
	if got := len(s.points); got != 2 || s.points[1].committed != 5 || s.points[1].position != -1 {
		t.Fatalf("points %+v: want 0 then 5 (position unknown)", s.points)
	}
	at := t0.Add(3 * minStep)
	for i := range 100000 {
		committed = int64(10 + i)
		at = at.Add(minStep)
		sample(at)
	}
	if n := len(s.points); n > maxPoints || n < maxPoints/4 {
		t.Errorf("%d points kept, want at most %d and not far fewer", n, maxPoints)
	}
	if last := s.points[len(s.points)-1]; last.committed != taken {
		t.Errorf("last point %d, want the last sample taken, %d", last.committed, taken)
	}
}
