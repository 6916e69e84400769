package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/kwire/kwire/correlate"
)

const analyzeHelp = `Usage: kwire analyze [flags] FILE...

Rebuild every consumer group from one or more pcap/pcapng files (merged by
packet time: one capture per broker host is normal): coordinators, every
generation with its members, leader, assignments and cause (member joined,
left, expired, metadata change, or unknown when the capture began mid-way),
what each group fetched (positions, records, bytes, high watermark, lag)
and committed.

It also flags the consumer mistakes that lose or replay data (hazards):
commits going backwards, skipping delivered records, past what was
fetched, rejected, or made by a non-owner; zombie fetches; silent offset
resets; expired members, late heartbeats, rebalance storms; weak producer
acks; client id churn. Each has a severity (info, warn, critical) and the
exchanges it rests on (times and connections, to find them in Wireshark).

On a terminal: a timeline of group events and hazards, then a report per
group with its hazards by severity. With --json (or when stdout is not a
terminal): NDJSON events (generation, member, commit, coordinator, hazard),
anomalies, a final "summary" object with the whole state and a "stats"
line (schema: docs/schema.md).

With --html FILE: also one self-contained HTML report of the capture,
which any browser opens offline: an overview (span, files, brokers,
groups, hazards by severity, everything lost or skipped), per group a
timeline of its generations, members and hazards, partition ownership
and offsets over time, and each hazard and generation with the
exchanges it rests on and a Wireshark display filter for each.

With --tui: a terminal UI (groups, group detail, hazards, traffic, loss
counters) over a replay of the files, as fast as possible, at capture pace
(--replay=real, --speed) or paused and stepped (--replay=paused); ? shows
the keys.

Exit status: 0, or 1 on an error, 2 on a bad command line, 3 when
--fail-on finds hazards.

Examples:
  kwire analyze capture.pcapng
  kwire analyze b1.pcapng b2.pcapng b3.pcapng
  kwire analyze --json capture.pcapng | jq 'select(.type=="generation")'
  kwire analyze --fail-on=critical integration-test.pcapng
  kwire analyze --html incident.html b1.pcapng b2.pcapng b3.pcapng
  kwire analyze --tui --replay=real capture.pcapng

Flags:
`

// errHazards is returned when --fail-on finds hazards; the exit status is 3.
var errHazards = errors.New("hazards found")

func cmdAnalyze(args []string, stdout, stderr io.Writer) error {
	var cf commonFlags
	fs := newFlagSet("analyze", analyzeHelp, stderr)
	cf.register(fs)
	failOn := fs.String("fail-on", "", "exit with status 3 when any hazard of this `SEVERITY` or worse is found: warn or critical (for CI pipelines that capture their tests)")
	html := fs.String("html", "", "also write an HTML report of the capture to `FILE` (one file, opens offline; readable by its owner only)")
	cf.registerShards(fs)
	var tf tuiFlags
	tf.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := cf.checkShards("analyze", stderr, tf.on); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, "kwire analyze: no capture file given\n\n")
		fs.Usage()
		return errUsage
	}
	rank := 0
	if *failOn != "" {
		if rank = correlate.SeverityRank(*failOn); rank < 2 {
			fmt.Fprintf(stderr, "kwire analyze: --fail-on %q: want warn or critical\n", *failOn)
			return errUsage
		}
	}
	if *html != "" && (tf.on || cf.shards > 1) {
		fmt.Fprint(stderr, "kwire analyze: --html samples one correlator as the files are read: leave --tui and --shards out\n")
		return errUsage
	}
	p := newPipeline(&cf, stdout, false)
	if *html != "" {
		p.html = newHTMLReport(*html, fs.Args(), false)
	}
	run := func() error { return p.runFiles(fs.Args(), &cf, true, stderr) }
	if tf.on {
		run = func() error { return p.runTUI(fs.Args(), &cf, &tf) }
	}
	if err := run(); err != nil {
		return err
	}
	if n := p.atOrAbove(rank); rank > 0 && n > 0 {
		fmt.Fprintf(stderr, "kwire: %d hazard(s) at %s or above (--fail-on)\n", n, *failOn)
		return errHazards
	}
	return nil
}
