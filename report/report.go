package report

import (
	"bufio"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/jsonout"
)

// Input is what a report shows: the analyzer's final state and counters,
// and what a Recorder kept of the capture over time.
type Input struct {
	// Sources names what was analysed: the capture files, or the
	// interface of a live capture.
	Sources []string
	// Live says the report is of a live capture (kwire live), written
	// at exit or on demand.
	Live bool
	// Version is the kwire that wrote it.
	Version  string
	Snapshot *correlate.Snapshot
	Capture  capture.Stats
	Decode   decode.Stats
	// Recorder is what was recorded over time; nil: only the Snapshot
	// (offsets are then drawn from the commits it remembers).
	Recorder *Recorder
}

// Limits of the page: past them, items are summarised, so that the page
// of a capture with thousands of members or hazards stays small.
const (
	maxLanes        = 40  // member lanes drawn per group
	maxMemberRows   = 300 // members listed per group
	maxOwnerRows    = 64  // partitions in the ownership figure
	maxOffsetCharts = 24  // partitions charted per group
	maxHazardItems  = 200 // hazards listed with their evidence
	maxGenRows      = 200 // generations listed per group (as many as a group remembers by default)
)

//go:embed page.html.tmpl
var pageTemplate string

//go:embed style.css
var style string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"join": strings.Join,
}).Parse(pageTemplate))

// Write writes the report of in to w: one HTML file, its styles and
// figures (SVG) inline, that any browser opens offline. The output
// depends only on in: offline runs are deterministic.
func Write(w io.Writer, in *Input) error {
	if in.Snapshot == nil {
		return fmt.Errorf("report: no snapshot")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := page.Execute(bw, build(in)); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return bw.Flush()
}

// view is what the template reads.
type view struct {
	Title     string
	Style     template.CSS
	Defs      template.HTML
	In        *Input
	From, To  string
	Span      string
	Sources   []string
	Brokers   []kv
	Groups    []*groupView
	Hazards   []*hazardView
	HazardsBy []kv // counts by severity
	// HazardsMore counts hazards not listed (maxHazardItems, and those
	// the analyzer itself did not keep).
	HazardsMore  int64
	HazardKinds  []kv
	Timeline     template.HTML
	Loss         []lossRow
	Lossless     bool
	Anomalies    []anomalyRow
	AnomalyKinds []kv
	AnomalyMore  int64
	Limits       string
	Transactions table
	Stable       table
	Unattributed table
	APIs         []kv
}

type kv struct {
	K, V string
	// Ref is an anchor in the page, when the item has one.
	Ref string
}

type lossRow struct {
	What  string
	N     string
	Notes string
	Bad   bool
}

type anomalyRow struct {
	Time, Kind, Conn, API, Detail string
	Bytes                         int64
	CorrelationID                 int32
	Filter                        string
}

func build(in *Input) *view {
	s := in.Snapshot
	v := &view{Title: "kwire report: " + strings.Join(in.Sources, ", "), Style: template.CSS(style), //nolint:gosec // ours
		Defs: template.HTML(defs), In: in, Sources: in.Sources} //nolint:gosec // ours
	from, to := span(in)
	v.From, v.To, v.Span = clock(from), clock(to), dur(to.Sub(from))
	for _, id := range slices.Sorted(maps.Keys(s.Brokers)) {
		v.Brokers = append(v.Brokers, kv{K: "node " + id, V: s.Brokers[id]})
	}
	hz := hazardViews(s, v)
	for i := range s.Groups {
		v.Groups = append(v.Groups, groupOf(in, i, hz))
	}
	v.Hazards = hz.list
	v.HazardsMore = s.HazardsDropped + int64(len(s.Hazards)-len(hz.list))
	for _, sev := range []string{correlate.SeverityCritical, correlate.SeverityWarn, correlate.SeverityInfo} {
		v.HazardsBy = append(v.HazardsBy, kv{K: sev, V: fmt.Sprint(s.HazardCounts[sev])})
	}
	v.HazardKinds = hz.kinds()
	v.Timeline = captureTimeline(in, v, from, to, hz)
	v.Loss, v.Lossless = lossRows(in)
	v.anomalies(in.Recorder)
	v.Transactions = jsonTable(s.Transactions)
	v.Stable = jsonTable(s.StablePartitions)
	v.Unattributed = jsonTable(s.Unattributed, "partitions")
	for k, n := range in.Decode.ByKey {
		if n > 0 {
			v.APIs = append(v.APIs, kv{K: jsonout.APIName(int16(k)), V: fmt.Sprint(n)})
		}
	}
	slices.SortFunc(v.APIs, func(a, b kv) int { return strings.Compare(a.K, b.K) })
	return v
}

// span is the capture's time span: from the first time recorded (or seen
// in the state) to the Snapshot's.
func span(in *Input) (from, to time.Time) {
	to = in.Snapshot.Time.Time
	from = to
	if r := in.Recorder; r != nil && !r.start.IsZero() {
		from = r.start
	}
	for i := range in.Snapshot.Groups {
		if f, _ := groupSpan(in, &in.Snapshot.Groups[i]); f.Before(from) {
			from = f
		}
	}
	for _, h := range in.Snapshot.Hazards {
		if t := h.Time(); !t.IsZero() && t.Before(from) {
			from = t
		}
	}
	return from.UTC(), to.UTC()
}

func (v *view) anomalies(r *Recorder) {
	if r == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(r.anomalyKinds)) {
		v.AnomalyKinds = append(v.AnomalyKinds, kv{K: k, V: fmt.Sprint(r.anomalyKinds[k])})
		v.AnomalyMore += r.anomalyKinds[k]
	}
	for _, a := range r.anomalies {
		v.Anomalies = append(v.Anomalies, anomalyRow{Time: clock(a.Time), Kind: a.Kind,
			Conn: fmt.Sprintf("%d: %s → %s", a.Conn.ID, a.Conn.Client, a.Conn.Broker), API: a.API, Detail: a.Detail,
			Bytes: a.Bytes, CorrelationID: a.CorrelationID, Filter: wiresharkFilter(a.Conn, a.CorrelationID)})
	}
	v.AnomalyMore -= int64(len(v.Anomalies))
}
