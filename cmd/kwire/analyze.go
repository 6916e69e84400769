package main

import (
	"errors"
	"fmt"
	"io"
)

const analyzeHelp = `Usage: kwire analyze [flags] FILE...

Rebuild every consumer group from one or more pcap/pcapng files (merged by
packet time: one capture per broker host is normal): coordinators, every
generation with its members, leader, assignments and cause (member joined,
left, expired, metadata change, or unknown when the capture began mid-way),
what each group fetched (positions, records, bytes) and committed.

Lag, per group partition, as an operator reads it:
  lag          end offset - committed offset, as kafka-consumer-groups.sh
               prints LAG (the end: the newest high watermark any client's
               Fetch, Produce or ListOffsets showed)
  lag s        how long ago the record at the committed offset was made,
               from the record batches on the wire (~: estimated)
  health       ok, lagging, stalled, stopped or rewind over the last
               --health-window, as Burrow judges commits, with what the
               wire shows behind a stop; a stop or stall that lasts the
               window is a consumer_stopped or consumer_stalled hazard
The same figures are in --json (docs/schema.md), the metrics
(kafka_consumergroup_lag, kafka_consumergroup_lag_seconds) and the TUI.

It also flags the consumer mistakes that lose or replay data (hazards):
commits going backwards, skipping delivered records, past what was
fetched, rejected, or made by a non-owner; zombie fetches; silent offset
resets; expired members, late heartbeats, rebalance storms; weak producer
acks; client id churn. Each has a severity (info, warn, critical) and the
exchanges it rests on (times and connections, to find them in Wireshark).

On a terminal, or with --text: a report, written once the files are read:
a verdict per group (its worst hazard, the records lost or processed again
by partition and offset range, which members and clients), a line of what
to do per hazard kind (docs/runbook.md says more), the timeline of group
events, hazards and anomalies in capture time order (UTC, with the date,
as the NDJSON ts), then per group its generations, members and partitions
and the hazards with the exchanges they rest on. The info hazards every new
group shows (partitions without committed offset, auto-commits, the
broker's initial rebalance delay) are folded into one line per group.
Member ids are cut to a prefix of 8 hex digits of their random part,
which finds the whole id in the NDJSON (--full-ids: whole).

With --json, or when stdout is not a terminal (then said on stderr when
it is a terminal: kwire analyze FILE | less shows NDJSON): NDJSON events
(generation, member, commit, coordinator, hazard), anomalies, a final
"summary" object with the whole state and a "stats" line (schema:
docs/schema.md).

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

Filters: --group NAME, --since TIME and --until TIME (TIME: RFC 3339,
e.g. 2026-12-02T00:19:50Z, or a time of day in UTC, 00:19:50, on the day
the capture begins) write and judge (--fail-on) only the events of that
group, and the events, anomalies and hazards of that time (a hazard by its
ts, which may be before it was judged); the summary's groups, clients,
fetches and hazards likewise. The files are still correlated whole: what
came before --since still rebuilds the groups (members, generations,
committed offsets), and the summary's tables are the state at the end of
the capture.

CI: --fail-on LIST exits with status 3 when a hazard matches LIST, a
comma-separated list of
  warn, critical     any hazard of that severity or worse
  lost               records never processed (every critical hazard)
  replayed           records processed again (rejected or backward
                     commits, resets back, expired members' uncommitted
                     records, aborted transactional offsets, share
                     group redeliveries), at warn or worse
  KIND[:SEVERITY]    that hazard kind (at any severity, or that or worse)
  -KIND              never that kind, whatever else matches it
Info hazards fail the run only where their kind is named: every new
consumer group has some. Kinds: docs/runbook.md.

Exit status: 0, or 1 on an error, 2 on a bad command line, 3 when
--fail-on finds hazards.

Examples:
  kwire analyze capture.pcapng
  kwire analyze b1.pcapng b2.pcapng b3.pcapng
  kwire analyze --text capture.pcapng | less
  kwire analyze --json capture.pcapng | jq 'select(.type=="generation")'
  kwire analyze --fail-on=lost,replayed integration-test.pcapng
  kwire analyze --fail-on=warn,commit_on_receive,-rebalance_slow integration-test.pcapng
  kwire analyze --group orders --since 00:19:50 --until 00:20:10 capture.pcapng
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
	failOnFlag := fs.String("fail-on", "", failOnUsage)
	group := fs.String("group", "", "write and judge only the events and hazards of consumer group `NAME` (see Filters above)")
	since := fs.String("since", "", "write and judge only what happened at or after `TIME` (see Filters above)")
	until := fs.String("until", "", "write and judge only what happened before `TIME` (see Filters above)")
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
	failOn, err := parseFailOn(*failOnFlag)
	if err != nil {
		fmt.Fprintf(stderr, "kwire analyze: %v\n", err)
		return errUsage
	}
	win, err := newWindow(*group, *since, *until)
	if err != nil {
		fmt.Fprintf(stderr, "kwire analyze: %v\n", err)
		return errUsage
	}
	if win != nil && tf.on {
		fmt.Fprint(stderr, "kwire analyze: --group, --since and --until filter the written output; the terminal UI shows everything (filter it with /)\n")
		return errUsage
	}
	if *html != "" && (tf.on || cf.shards > 1) {
		fmt.Fprint(stderr, "kwire analyze: --html samples one correlator as the files are read: leave --tui and --shards out\n")
		return errUsage
	}
	cf.report = true
	p := newPipeline(&cf, stdout, false)
	if *html != "" {
		p.html = newHTMLReport(*html, fs.Args(), false)
	}
	p.window, p.failOn = win, failOn
	run := func() error { return p.runFiles(fs.Args(), &cf, true, stderr) }
	if tf.on {
		run = func() error { return p.runTUI(fs.Args(), &cf, &tf) }
	} else {
		cf.noteNDJSON("analyze", stdout, stderr)
	}
	if err := run(); err != nil {
		return err
	}
	if len(p.failed) > 0 {
		fmt.Fprintf(stderr, "kwire: %v match --fail-on=%s\n", p.failed, failOn.text)
		return errHazards
	}
	return nil
}
