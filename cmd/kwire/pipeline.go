package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/jsonout"
	"github.com/kwire/kwire/route"
)

// pipeline wires decode -> correlate -> jsonout for one run.
type pipeline struct {
	out  *jsonout.Writer
	dec  *decode.Decoder
	corr *correlate.Correlator
	// exchanges writes a line per exchange (kwire read); text leaves
	// commit events out of text output (the exchange lines or the final
	// report already show them).
	exchanges, text bool
	// window, when set, keeps of the output only a group and a time
	// (kwire analyze --group, --since, --until; window.go).
	window *window
	// failOn, when set, is --fail-on; failed counts the hazards it matched.
	failOn *failOn
	failed failures
	// tap, when set, also gets every exchange and event (kwire live's
	// metrics exporter).
	tap tap
	// agent, when set, publishes every exchange and anomaly (kwire live
	// --publish; publish.go).
	agent *publisher
	// tls, when set, decrypts TLS connections before the decoder
	// (--tls-keylog, tls.go).
	tls *capture.TLSDecrypter
	// ho, when set, runs correlate and output on a goroutine of their own.
	ho *handoff
	// lines, when set, formats exchange lines on ho's goroutine, for it to
	// write (kwire read).
	lines *jsonout.Lines
	// deferredErrors are the decode errors of responses ho decoded.
	deferredErrors int64
	// shards, when set (--shards above 1, offline), correlates in place
	// of corr, through ho.
	shards   *route.Shards
	corrOpts *correlate.Options
	// html, when set, records the run for the HTML report and writes
	// it at the end (--html, --report; html.go).
	html *htmlReport
	evs  []correlate.Event // event's, until written
}

// events implements shardWriter.
func (p *pipeline) events(evs []correlate.Event) {
	for _, ev := range evs {
		p.writeEvent(ev)
	}
}

// anomalyLine implements shardWriter (offline: no agent to publish to).
func (p *pipeline) anomalyLine(a *decode.Anomaly) { p.out.Anomaly(a) }

// tap is a second consumer of the pipeline's exchanges and events.
type tap interface {
	Exchange(e *decode.Exchange)
	Event(ev correlate.Event)
}

func newPipeline(cf *commonFlags, stdout io.Writer, exchanges bool) *pipeline {
	p := &pipeline{exchanges: exchanges}
	p.out, p.text = cf.writer(stdout)
	opts := cf.correlate()
	p.corr = correlate.New(opts, correlate.SinkFunc(p.event))
	p.corrOpts = opts
	p.dec = decode.New(p, &decode.Options{MaxFrame: cf.maxFrame, MaxBuffered: cf.maxBuf, MaxPending: cf.limits.pending,
		DropProduceRecords: !exchanges, // only exchange lines show them
		ReferenceKmsg:      referenceFromEnv().kmsg})
	return p
}

// Exchange implements decode.Handler.
func (p *pipeline) Exchange(e *decode.Exchange) {
	if p.ho != nil {
		p.ho.Exchange(e)
		return
	}
	p.exchange(e)
}

// Anomaly implements decode.Handler.
func (p *pipeline) Anomaly(a *decode.Anomaly) {
	if p.ho != nil {
		p.ho.Anomaly(a)
		return
	}
	p.anomaly(a)
}

// ConnClosed implements decode.CloseHandler.
func (p *pipeline) ConnClosed(c *capture.Conn, at time.Time, reason capture.CloseReason) {
	if p.ho != nil {
		p.ho.ConnClosed(c, at, reason)
		return
	}
	p.connClosed(c, at, reason)
}

func (p *pipeline) connClosed(c *capture.Conn, at time.Time, reason capture.CloseReason) {
	p.corr.ConnClosed(c, at, reason)
	p.written()
}

func (p *pipeline) exchange(e *decode.Exchange) {
	if p.agent != nil {
		p.agent.Exchange(e)
	}
	if p.tap != nil {
		p.tap.Exchange(e)
	}
	if p.exchanges && p.lines == nil {
		p.out.Exchange(e)
	}
	p.corr.Exchange(e)
	if p.html != nil {
		p.html.exchange(e, p.corr)
	}
	p.written()
}

func (p *pipeline) anomaly(a *decode.Anomaly) {
	if p.agent != nil {
		p.agent.Anomaly(a)
	}
	if p.html != nil {
		p.html.rec.Anomaly(a)
	}
	if p.window == nil || p.window.at(a.Time) {
		p.out.Anomaly(a)
	}
	p.corr.Anomaly(a) // loss the absence-based hazards check
	p.written()
}

// event takes an event the correlator gives: it is written once the
// call that gave it returns (written).
func (p *pipeline) event(ev correlate.Event) { p.evs = append(p.evs, ev) }

// written writes the events of the correlator's last call, in the order
// of their keys (route.SortEvents: the order of a sharded run's).
func (p *pipeline) written() {
	route.SortEvents(p.evs)
	for _, ev := range p.evs {
		p.writeEvent(ev)
	}
	clear(p.evs)
	p.evs = p.evs[:0]
}

func (p *pipeline) writeEvent(ev correlate.Event) {
	if p.tap != nil {
		p.tap.Event(ev)
	}
	if p.window != nil && !p.window.event(ev) {
		return
	}
	if h, ok := ev.(*correlate.HazardEvent); ok && p.failOn != nil && p.failOn.matches(h) {
		if p.failed == nil {
			p.failed = failures{}
		}
		p.failed[h.Kind]++
	}
	if p.html != nil {
		p.html.rec.Event(ev)
	}
	if _, ok := ev.(*correlate.CommitEvent); ok && p.text {
		return
	}
	p.out.Event(ev)
}

// runFiles reads capture files through the pipeline until they end or the
// user interrupts; summary adds the final group report. It always writes
// the stats line, so that what was decoded before an error is kept, and
// warns on stderr of what in the files was not as it should be.
func (p *pipeline) runFiles(files []string, cf *commonFlags, summary bool, stderr io.Writer) error {
	perConn, total := cf.limits.reorderPages()
	ref := referenceFromEnv()
	src, err := capture.OpenFiles(files, &capture.Options{Ports: cf.ports, MaxConns: cf.limits.conns,
		MaxBufferedPagesPerConn: perConn, MaxBufferedPagesTotal: total, ReferenceRead: ref.read, ReferenceTCP: ref.tcp})
	if err != nil {
		return err
	}
	defer src.Close()
	entry, err := p.entry(cf, false, stderr)
	if err != nil {
		return err
	}
	clock := &lastTime{next: entry}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if p.tap == nil && p.agent == nil {
		// Correlating and writing run on the other core (handoff), and
		// so do kwire read's exchange lines, made and written before the
		// events that the exchange gives (as p.exchange would write them).
		if cf.shards > 1 {
			p.shards = route.NewShards(cf.shards, p.corrOpts)
			p.ho = newShardedHandoff(p.shards, p, p.dec.Recycle)
		} else {
			p.ho = newHandoff(handlerFuncs{p.exchange, p.anomaly, p.connClosed}, p.dec.Recycle)
		}
		p.ho.rd.ReferenceKmsg(ref.kmsg)
		p.dec.SetDeferResponses(true)
		if p.exchanges {
			p.lines = jsonout.NewLines(cf.outputOptions(p.text))
			p.ho.lines(p.lines.AppendScanned, p.out.WriteLines)
		}
	}
	runErr := src.Run(ctx, clock)
	if p.ho != nil {
		p.ho.close()
		p.dec.SetDeferResponses(false)
		p.deferredErrors += p.ho.rd.DecodeErrors
		p.ho = nil
	}
	if p.lines != nil {
		if err := p.lines.Err(); err != nil && runErr == nil {
			runErr = fmt.Errorf("write output: %w", err)
		}
		p.lines = nil
	}
	end := clock.t
	if end.IsZero() {
		// No chunk at all (nothing on the ports, or nothing readable):
		// the summary and stats are of now, never of the year 1.
		end = time.Now().UTC()
	}
	if err := p.finish(end, end, src.Stats(), summary); err != nil {
		return err
	}
	st := src.Stats()
	if st.FilesTruncated > 0 {
		fmt.Fprintf(stderr, "kwire: warning: %d capture file(s) end in a cut record (capture stopped uncleanly?): everything before it was analysed\n", st.FilesTruncated)
	}
	for _, q := range src.Quirks() { // once per file, however many records
		fmt.Fprintf(stderr, "kwire: warning: %s: %d record(s) give an original length below their captured length (some capture libraries write them so): read with the captured length, as tshark does (orig_len_short in stats)\n", q.Path, q.OrigLenShort)
	}
	warnDamage(stderr, src.Damage())
	if a, b, ok := src.Apart(filesApart); ok {
		fmt.Fprintf(stderr, "kwire: warning: the capture files do not overlap in time: %s ends at %s, %s begins %s later: "+
			"they are analysed as one capture with nothing in between (a group seen on both sides looks silent for that long); were they captured together?\n",
			a.Path, a.Last.UTC().Format(time.RFC3339Nano), b.Path, b.First.Sub(a.Last).Round(time.Second))
	}
	if p.shards != nil && p.shards.CrossBinds() > 0 {
		fmt.Fprintf(stderr, "kwire: warning: --shards %d: %d client(s) bound to consumer groups that different shards correlate: "+
			"what those groups' lines say may differ from one correlator's (run with --shards 1)\n", p.shards.N(), p.shards.CrossBinds())
	}
	return runErr
}

// filesApart is the stretch of time no capture file covers beyond which
// merged files are said not to overlap: longer than any client stays
// silent (heartbeats are seconds apart), so that rotated files, which
// follow each other, are not.
const filesApart = time.Minute

// warnDamage says once per capture file read past damage where the first
// damaged record was and what was skipped.
func warnDamage(w io.Writer, damage []capture.FileDamage) {
	for _, d := range damage {
		times := "once"
		if d.Resyncs > 1 {
			times = fmt.Sprintf("%d times", d.Resyncs)
		}
		fmt.Fprintf(w, "kwire: warning: %s: damaged record at byte %d; resynchronised %s, skipped %d bytes (see stats): everything else was analysed\n",
			d.Path, d.Offset, times, d.Skipped)
	}
}

// finish ends a run: the correlator closes at capture time end (expiries
// due by then, generations not yet emitted), then the summary (if asked),
// the final stats line stamped statsAt, and a flush.
func (p *pipeline) finish(end, statsAt time.Time, cs capture.Stats, summary bool) error {
	cs = p.captureStats(cs)
	var snap *correlate.Snapshot
	if p.shards != nil {
		p.shards.Close(end, p.events)
		if summary {
			snap = p.shards.Snapshot()
		}
	} else {
		p.corr.Close(end)
		p.written()
		if summary {
			snap = p.corr.Snapshot()
		}
	}
	if snap != nil {
		if snap.Time.IsZero() {
			// Nothing was captured (an empty kwire live run): the
			// summary is stamped like the stats line, not 0001-01-01.
			snap.Time = correlate.TimeOf(statsAt)
		}
		if p.window != nil {
			p.window.snapshot(snap)
		}
		p.out.Summary(snap)
	}
	ds := p.dec.Stats()
	ds.DecodeErrors += p.deferredErrors
	p.out.Stats(statsAt, cs, ds)
	if err := p.out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if p.html != nil && snap != nil {
		return p.html.write(snap, cs, ds)
	}
	return nil
}
