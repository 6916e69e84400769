// Command kwire analyses Kafka traffic from the wire: capture files, live
// interfaces or eBPF socket probes. See `kwire help`.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kwire/kwire/internal/version"
)

const usage = `kwire: a wire-level Kafka protocol analyzer

Usage:
  kwire analyze [flags] FILE...   rebuild consumer groups (generations,
                                  members, assignments, fetches, commits)
                                  from pcap/pcapng files (merged by time)
  kwire read [flags] FILE...      decode every Kafka request and response
  kwire live -i IFACE [flags]     capture on a broker or client host (Linux,
                                  CAP_NET_RAW): group events as they happen,
                                  loss counters, Prometheus metrics
  kwire aggregate --from kafka://HOST:PORT/TOPIC [flags]
                                  analyse what kwire live agents on every
                                  broker host publish (live --publish), as
                                  one capture
  kwire version                   print kwire's version, commit, build date
                                  and Go version (also: kwire --version)
  kwire help [COMMAND]            show help for a command

Files captured per broker host are merged by packet time, so a consumer's
traffic to several brokers is analysed together. Capture with, e.g.:
  tcpdump -i any -s 0 -w broker1.pcapng 'tcp port 9092'

Run 'kwire help analyze', 'kwire help read', 'kwire help live' or
'kwire help aggregate' for flags and output.
`

// errUsage is returned for a bad command line; main prints usage and exits 2.
var errUsage = errors.New("usage")

func main() {
	dropCaps = true
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "read":
		err = cmdRead(args[1:], stdout, stderr)
	case "analyze":
		err = cmdAnalyze(args[1:], stdout, stderr)
	case "live":
		err = cmdLive(args[1:], stdout, stderr)
	case "aggregate":
		err = cmdAggregate(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprint(stdout, version.Get().Long())
		return 0
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if cmd, ok := map[string]func([]string, io.Writer, io.Writer) error{"read": cmdRead, "analyze": cmdAnalyze, "live": cmdLive, "aggregate": cmdAggregate}[args[1]]; ok {
				err = cmd([]string{"-h"}, stdout, stderr)
				break
			}
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "kwire: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errHazards):
		return 3
	}
	fmt.Fprintf(stderr, "kwire: %v\n", err)
	return 1
}
