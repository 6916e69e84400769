package jsonout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kwire/kwire/correlate"
)

// Event writes a correlate event: its fields behind "v", "type" and "ts".
// It implements correlate.Sink.
func (w *Writer) Event(ev correlate.Event) {
	if w.opts.Text {
		if w.timeline != nil {
			w.timeline.event(ev, w.opts.ids(textEvent(ev)))
			return
		}
		w.line(w.opts.ids(w.markLate(textEvent(ev), ev.Time())))
		return
	}
	if c, ok := ev.(*correlate.CommitEvent); ok && !w.opts.Reference {
		w.scratch = append(commitLine(w.scratch[:0], c, &w.commits), '\n')
		w.write(w.scratch)
		return
	}
	w.envelope(ev.Type(), ev.Time(), ev)
}

// lateBy is how far behind the latest event written an event must be to
// be marked late in text written as it comes: events of one moment on
// different connections come a little out of order.
const lateBy = 100 * time.Millisecond

// markLate marks line, an event of time t written as it comes, when it
// is behind the latest written by lateBy or more: a hazard judged after a
// grace (a rejected commit not retried, an expiry), written after events
// of later times. The report (Options.Report) puts it in its place instead.
func (w *Writer) markLate(line string, t time.Time) string {
	if !t.Before(w.latest.Add(-lateBy)) {
		w.latest = later(w.latest, t)
		return line
	}
	first, rest, _ := strings.Cut(line, "\n")
	first += " [late: reported after events of " + Time(w.latest) + "]"
	if rest != "" {
		return first + "\n" + rest
	}
	return first
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Summary writes the final "type":"summary" object: the correlator's state.
func (w *Writer) Summary(s *correlate.Snapshot) {
	if w.opts.Text {
		if w.timeline == nil {
			w.line("") // after the events written as they came
		}
		w.line(textReport(s, w.timeline, &w.opts))
		return
	}
	w.envelope("summary", s.Time.Time, s)
}

// envelope writes v's JSON object with the common fields in front.
func (w *Writer) envelope(typ string, ts time.Time, v any) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.err = fmt.Errorf("encode %s: %w", typ, err)
		return
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"v":%d,"type":%q,"ts":%q,"ts_ms":%d`, SchemaVersion, typ, Time(ts), ts.UnixMilli())
	if len(b) > 2 {
		buf.WriteByte(',')
	}
	buf.Write(b[1:])
	w.line(buf.String())
}

func textEvent(ev correlate.Event) string {
	ts := Time(ev.Time())
	switch e := ev.(type) {
	case *correlate.GenerationEvent:
		var b strings.Builder
		fmt.Fprintf(&b, "%s GENERATION %s gen %d %s/%s: %d members, leader %s, cause %s", ts, e.Group, e.Generation,
			e.ProtocolType, e.Protocol, len(e.Members), e.Leader, CauseText(e.Cause))
		if e.DurationMillis != nil {
			fmt.Fprintf(&b, ", rebalance %dms", *e.DurationMillis)
		}
		if e.Missed > 0 {
			fmt.Fprintf(&b, " (%d generations not in the capture)", e.Missed)
		}
		if cv := e.Converted; cv != nil {
			fmt.Fprintf(&b, "\n    converted %s -> %s, generation %d carried over: %s", cv.From, cv.To, cv.Generation, cv.Reason)
		}
		for _, m := range e.Members {
			fmt.Fprintf(&b, "\n    %s %s@%s %s", m.MemberID, m.ClientID, m.ClientHost, correlate.MemberAssignmentText(m.Assignment, m.Tasks))
		}
		return b.String()
	case *correlate.MemberEvent:
		s := fmt.Sprintf("%s MEMBER %s %s %s (%s@%s) gen %d", ts, e.Action, e.Group, e.MemberID, e.ClientID, e.ClientHost, e.Generation)
		if e.SilentMillis > 0 {
			s += fmt.Sprintf(", silent %dms (session timeout %dms)", e.SilentMillis, e.SessionTimeoutMillis)
		}
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		return s
	case *correlate.CommitEvent:
		s := fmt.Sprintf("%s COMMIT %s %s[%d]=%d by %s gen %d: %s", ts, e.Group, e.Topic, e.Partition, e.Offset, e.MemberID, e.Generation, e.Outcome)
		if e.Error != "" {
			s += " " + e.Error
		}
		return s
	case *correlate.HazardEvent:
		return fmt.Sprintf("%s HAZARD %s %s: %s", ts, strings.ToUpper(e.Severity), e.Kind, e.Summary)
	case *correlate.TransactionEvent:
		s := fmt.Sprintf("%s TXN %s %s pid %d epoch %d (%s@%s)", ts, e.Action, e.TransactionalID, e.ProducerID, e.ProducerEpoch, e.ClientID, e.ClientHost)
		if e.Group != "" {
			s += " group " + e.Group
		}
		if len(e.Partitions) > 0 {
			s += " " + correlate.AssignmentText(e.Partitions)
		}
		if e.DurationMillis != nil {
			s += fmt.Sprintf(" after %dms (%s)", *e.DurationMillis, e.EndedBy)
		}
		if e.Error != "" {
			s += " " + e.Error
		}
		return s
	case *correlate.ShareGroupEvent:
		s := fmt.Sprintf("%s SHARE %s %s %s[%d] by %s (%s@%s)", ts, e.Action, e.Group, e.Topic, e.Partition, e.MemberID, e.ClientID, e.ClientHost)
		if e.Action == correlate.ShareAcquired {
			s += fmt.Sprintf(": %d records", e.Records)
			if e.Redelivered > 0 {
				s += fmt.Sprintf(", %d redelivered (delivery count up to %d)", e.Redelivered, e.MaxDeliveryCount)
			}
			return s
		}
		s += fmt.Sprintf(": %d accepted, %d released, %d rejected", e.Accepted, e.Released, e.Rejected)
		if e.Renewed > 0 {
			s += fmt.Sprintf(", %d renewed", e.Renewed)
		}
		if e.Error != "" {
			s += " " + e.Error
		}
		return s
	case *correlate.CoordinatorEvent:
		s := fmt.Sprintf("%s COORDINATOR %s -> node %d %s:%d (from %s, %s)", ts, e.Group, e.NodeID, e.Host, e.Port, e.LearnedFrom, e.Source)
		if e.Error != "" {
			s += " " + e.Error
		}
		return s
	}
	return fmt.Sprintf("%s %s", ts, strings.ToUpper(ev.Type()))
}

// CauseText says why a generation began, as the text output does, with
// member ids whole (the text output shortens them after).
func CauseText(c correlate.Cause) string {
	s := c.Kind
	if c.Member != "" {
		s += " " + c.Member
	}
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}
