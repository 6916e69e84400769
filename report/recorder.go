package report

import (
	"time"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/jsonout"
)

// A Recorder keeps, while a capture is analysed, what a final Snapshot no
// longer holds: each group partition's offsets over time (sampled), how
// many generations each group went through (a Snapshot remembers the
// last correlate.Options.MaxGenerations), and the first anomalies (gaps,
// resyncs...) with their times. Its memory is bounded whatever the
// length of the capture: a series past maxPoints keeps every other point
// and sampling slows down as the capture grows.
//
// A Recorder is not safe for concurrent use: the goroutine that calls the
// Correlator calls it.
type Recorder struct {
	start, last, next time.Time
	series            map[seriesKey]*series
	gens              map[string]*genCount
	anomalies         []Anomaly
	anomalyKinds      map[string]int64
}

// Sampling: at most every minStep of capture time, and no more than about
// samplesPer samples per elapsed capture time (the step grows with it).
const (
	minStep    = 100 * time.Millisecond
	samplesPer = 400
	// maxPoints is the most points a series keeps (each a few dozen
	// bytes of SVG path in the report).
	maxPoints = 400
	// maxAnomalies is how many anomalies are listed with their time and
	// connection; the rest are counted by kind.
	maxAnomalies = 200
)

type seriesKey struct {
	group, topic string
	partition    int32
}

// point is one partition's offsets at one time; -1 is unknown.
type point struct {
	at                                   time.Time
	committed, position, hwm, lso, deliv int64
}

type series struct{ points []point }

type genCount struct {
	events      int64
	first, last time.Time
}

// Anomaly is an anomaly as the report lists it.
type Anomaly struct {
	Time          time.Time
	Kind          string
	Conn          correlate.Conn
	Bytes         int64
	API           string
	CorrelationID int32
	Detail        string
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{series: map[seriesKey]*series{}, gens: map[string]*genCount{}, anomalyKinds: map[string]int64{}}
}

// Sample records every group partition's offsets at capture time at,
// through each (correlate.Correlator.PartitionOffsets), when the last
// sample is old enough; otherwise it only notes the time. Call it after
// each exchange the Correlator took.
func (r *Recorder) Sample(at time.Time, each func(fn func(group string, p *correlate.Partition))) {
	if at.IsZero() {
		return
	}
	if r.start.IsZero() || at.Before(r.start) {
		r.start = at
	}
	if at.After(r.last) {
		r.last = at
	}
	if at.Before(r.next) {
		return
	}
	r.next = at.Add(max(minStep, at.Sub(r.start)/samplesPer))
	each(func(group string, p *correlate.Partition) { r.add(at, group, p) })
}

func (r *Recorder) add(at time.Time, group string, p *correlate.Partition) {
	k := seriesKey{group, p.Topic, p.Partition}
	s := r.series[k]
	if s == nil {
		s = &series{}
		r.series[k] = s
	}
	pt := point{at: at, committed: val(p.Committed), position: val(p.Position), hwm: endOf(p),
		lso: val(p.LastStable), deliv: val(p.DeliveredTo)}
	if n := len(s.points); n > 0 {
		prev := s.points[n-1]
		prev.at = at
		if prev == pt {
			return // unchanged: the last point holds until the next one
		}
	}
	s.points = append(s.points, pt)
	if len(s.points) > maxPoints {
		s.thin()
	}
}

// thin keeps every other point, and the last one.
func (s *series) thin() {
	last := s.points[len(s.points)-1]
	kept := s.points[:0]
	for i := 0; i < len(s.points)-1; i += 2 {
		kept = append(kept, s.points[i])
	}
	s.points = append(kept, last)
}

func val(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// Event takes an event of the Correlator: generations are counted per
// group.
func (r *Recorder) Event(ev correlate.Event) {
	g, ok := ev.(*correlate.GenerationEvent)
	if !ok {
		return
	}
	c := r.gens[g.Group]
	if c == nil {
		c = &genCount{first: ev.Time()}
		r.gens[g.Group] = c
	}
	c.events++
	if t := ev.Time(); t.Before(c.first) {
		c.first = t
	} else if t.After(c.last) {
		c.last = t
	}
}

// Anomaly takes an anomaly of the decoder: the first maxAnomalies are
// listed, all are counted by kind.
func (r *Recorder) Anomaly(a *decode.Anomaly) {
	kind := string(a.Kind)
	r.anomalyKinds[kind]++
	if len(r.anomalies) >= maxAnomalies {
		return
	}
	out := Anomaly{Time: a.Time.UTC(), Kind: kind, Conn: correlate.Conn(jsonout.ConnOf(a.Conn)), Bytes: a.Bytes,
		CorrelationID: a.CorrelationID, Detail: a.Detail}
	if a.Key >= 0 {
		out.API = jsonout.APIName(a.Key)
	}
	r.anomalies = append(r.anomalies, out)
}
