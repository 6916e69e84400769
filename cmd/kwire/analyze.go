package main

import (
	"flag"
	"fmt"
	"io"
)

const analyzeHelp = `Usage: kwire analyze [flags] FILE...

Rebuild every consumer group from one or more pcap/pcapng files (merged by
packet time: one capture per broker host is normal): coordinators, every
generation with its members, leader, assignments and cause (member joined,
left, expired, metadata change, or unknown when the capture began mid-way),
what each group fetched (positions, records, bytes, high watermark, lag)
and committed.

On a terminal: a timeline of group events, then a report per group. With
--json (or when stdout is not a terminal): NDJSON events (generation,
member, commit, coordinator), anomalies, a final "summary" object with the
whole state and a "stats" line (schema: docs/schema.md).

Examples:
  kwire analyze capture.pcapng
  kwire analyze b1.pcapng b2.pcapng b3.pcapng
  kwire analyze --json capture.pcapng | jq 'select(.type=="generation")'

Flags:
`

func cmdAnalyze(args []string, stdout, stderr io.Writer) error {
	var cf commonFlags
	fs := newFlagSet("analyze", analyzeHelp, stderr)
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fs.SetOutput(stdout)
			fs.Usage()
		}
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, "kwire analyze: no capture file given\n\n")
		fs.Usage()
		return errUsage
	}
	return newPipeline(&cf, stdout, false).runFiles(fs.Args(), &cf, true)
}
