package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/version"
	"github.com/kwire/kwire/report"
)

// htmlReport is kwire analyze --html and kwire live --report: the run's
// HTML report (package report), written at the end, and by kwire live
// also on SIGUSR1. Its Recorder is fed on the goroutine that correlates.
type htmlReport struct {
	path    string
	sources []string
	live    bool
	rec     *report.Recorder
}

func newHTMLReport(path string, sources []string, live bool) *htmlReport {
	return &htmlReport{path: path, sources: sources, live: live, rec: report.NewRecorder()}
}

// exchange samples the group partitions' offsets after c took e.
func (h *htmlReport) exchange(e *decode.Exchange, c *correlate.Correlator) {
	at := e.ReqTime
	if e.RespTime.After(at) {
		at = e.RespTime
	}
	h.rec.Sample(at.UTC(), c.PartitionOffsets)
}

// write writes the report of snap to a new file beside the path, then
// renames it over the path: a browser (or the next SIGUSR1) never reads
// half a page. Like -w's capture files, it is readable by its owner only:
// it names the groups, clients and hosts.
func (h *htmlReport) write(snap *correlate.Snapshot, cs capture.Stats, ds decode.Stats) error {
	in := &report.Input{Sources: h.sources, Live: h.live, Version: strings.TrimPrefix(version.Get().Short(), "kwire "),
		Snapshot: snap, Capture: cs, Decode: ds, Recorder: h.rec}
	f, err := os.CreateTemp(filepath.Dir(h.path), ".kwire-report-*.html")
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	werr := report.Write(f, in)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(f.Name(), h.path)
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("html report %s: %w", h.path, werr)
	}
	return nil
}

// check says whether a report can be written: kwire live checks it
// before capturing (once it dropped its capabilities), not at exit.
func (h *htmlReport) check() error {
	f, err := os.CreateTemp(filepath.Dir(h.path), ".kwire-report-*.html")
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// writeReportNow writes the report of the state now (kwire live's SIGUSR1).
func (p *pipeline) writeReportNow(cs capture.Stats, now time.Time) error {
	snap := p.corr.Snapshot()
	if snap.Time.IsZero() {
		snap.Time = correlate.TimeOf(now)
	}
	return p.html.write(snap, p.captureStats(cs), p.dec.Stats())
}
