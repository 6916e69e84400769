package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/jsonout"
	"github.com/kwire/kwire/route"
)

const readHelp = `Usage: kwire read [flags] FILE...

Decode every Kafka request and its response in one or more pcap/pcapng
files. Several files are merged by packet time (one capture per broker host
is normal). Link types: Ethernet, Linux cooked v1/v2 (tcpdump -i any),
loopback, raw IP; IPv4/IPv6; VLAN tags.

The broker side of each TCP connection is the end whose port is in --port;
for other connections it is inferred (the SYN's destination, or the side
that receives bytes that parse as Kafka requests), so Kafka on other ports
is found too.

Output: one line per exchange (request + response), per anomaly and per
consumer-group event (generation, member, commit, coordinator), then a final
stats line. On a terminal the lines are human-readable; otherwise, or
with --json, they are NDJSON (schema: docs/schema.md), which a note on
stderr says when stderr is a terminal (kwire read FILE | less).

Examples:
  kwire read capture.pcapng
  kwire read --json b1.pcapng b2.pcapng b3.pcapng | jq 'select(.api=="OffsetCommit")'
  kwire read --port 19092-19094 cluster.pcap

Flags:
`

// commonFlags are the flags of every command that reads traffic.
type commonFlags struct {
	ports   capture.Ports
	json    bool
	text    bool
	fullIDs bool
	// report is kwire analyze's: text output is the report (verdict,
	// timeline, groups, hazards), written at the end.
	report   bool
	maxFrame int
	maxBuf   int
	limits   limitFlags // limits.go
	// consumerSession is the KIP-848 session timeout assumed: the
	// broker's group.consumer.session.timeout.ms is not on the wire.
	consumerSession time.Duration
	// shareDeliveryLimit is --share-delivery-limit, the brokers'
	// group.share.delivery.count.limit (not on the wire).
	shareDeliveryLimit int
	// tlsKeylog are the NSS key logs of --tls-keylog (tls.go).
	tlsKeylog fileList
	// shards is --shards: correlators of an offline run.
	shards int
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	c.ports, _ = capture.ParsePorts("9092")
	fs.Var(&replacePorts{p: &c.ports}, "port", "broker `PORTS`: a list and/or ranges, e.g. 9092,9093 or 19092-19094; repeat to add")
	fs.BoolVar(&c.json, "json", false, "write NDJSON (the default when stdout is not a terminal)")
	fs.BoolVar(&c.text, "text", false, "write human-readable lines (the default on a terminal)")
	fs.BoolVar(&c.fullIDs, "full-ids", false, "write member ids whole in text; otherwise a generated id is cut after 8 hex digits of its random part, "+
		"a prefix of the id that NDJSON, which always has it whole, can be searched for")
	fs.IntVar(&c.maxFrame, "max-frame", 100<<20, "largest Kafka frame decoded, in `BYTES`; larger ones are skipped and counted")
	fs.IntVar(&c.maxBuf, "max-buffer", 256<<20, "memory for partial frames across all connections, in `BYTES`; beyond it frames are skipped and counted")
	fs.DurationVar(&c.consumerSession, "consumer-session-timeout", 45*time.Second, "session timeout of KIP-848 consumer groups: "+
		"the brokers' group.consumer.session.timeout.ms, which is not on the wire; a member silent longer is expired, "+
		"and heartbeat_late is measured against it and the heartbeat interval the broker gives")
	fs.IntVar(&c.shareDeliveryLimit, "share-delivery-limit", 5, "deliveries of a share group's record before the broker archives it "+
		"unprocessed: the brokers' group.share.delivery.count.limit (or the group's share.delivery.count.limit), which is not "+
		"on the wire; share_redelivery says how many deliveries a poison record has left")
	fs.Var(&c.tlsKeylog, "tls-keylog", tlsKeylogUsage)
	c.limits.register(fs)
}

// correlate returns the correlator options of the limits and of the
// broker settings kwire is told because they are not on the wire.
func (c *commonFlags) correlate() *correlate.Options {
	o := c.limits.correlate()
	o.ConsumerSessionTimeout = c.consumerSession
	o.Hazards.ShareDeliveryLimit = c.shareDeliveryLimit
	return o
}

// registerShards adds --shards (kwire read and analyze).
func (c *commonFlags) registerShards(fs *flag.FlagSet) {
	fs.IntVar(&c.shards, "shards", 1, "`N` correlators, each on a goroutine of its own, the consumer groups split between them "+
		"(1 to 64; docs/sharding.md): the output is the same for any N, but where a client is bound to groups of two shards (then said on stderr)")
}

// brokerSettingsProblem says what is wrong with the broker settings kwire
// is told ("": nothing): Kafka accepts a share delivery limit of 2 to 10.
func (c *commonFlags) brokerSettingsProblem() string {
	if c.shareDeliveryLimit < 2 || c.shareDeliveryLimit > 10 {
		return fmt.Sprintf("--share-delivery-limit %d: Kafka's group.share.delivery.count.limit is 2 to 10", c.shareDeliveryLimit)
	}
	return ""
}

// checkShards reports a --shards out of range (or given with --tui) and
// a broker setting out of Kafka's range.
func (c *commonFlags) checkShards(cmd string, stderr io.Writer, tui bool) error {
	switch {
	case c.brokerSettingsProblem() != "":
		fmt.Fprintf(stderr, "kwire %s: %s\n", cmd, c.brokerSettingsProblem())
		return errUsage
	case c.shards < 1 || c.shards > route.MaxShards:
		fmt.Fprintf(stderr, "kwire %s: --shards %d: want 1 to %d\n", cmd, c.shards, route.MaxShards)
		return errUsage
	case tui && c.shards > 1:
		fmt.Fprintf(stderr, "kwire %s: --shards: the terminal UI correlates on one goroutine; leave --shards out with --tui\n", cmd)
		return errUsage
	}
	return nil
}

// writer returns the output writer the flags ask for, and whether it
// writes text.
func (c *commonFlags) writer(stdout io.Writer) (*jsonout.Writer, bool) {
	text := c.textOutput(stdout)
	return jsonout.New(stdout, c.outputOptions(text)), text
}

// textOutput reports whether the output to stdout is text: --text, or a
// terminal without --json.
func (c *commonFlags) textOutput(stdout io.Writer) bool {
	return c.text || (!c.json && isTerminal(stdout))
}

// outputOptions are the output options of the flags; text says whether
// the output is text.
func (c *commonFlags) outputOptions(text bool) *jsonout.Options {
	return &jsonout.Options{Text: text, Report: c.report, FullIDs: c.fullIDs, Reference: referenceFromEnv().lines}
}

// noteNDJSON says on stderr, once, that the output is NDJSON because
// stdout is not a terminal (piped to less, say), when no flag chose it.
func (c *commonFlags) noteNDJSON(cmd string, stdout, stderr io.Writer) {
	if !c.json && !c.text && !isTerminal(stdout) && isTerminal(stderr) {
		fmt.Fprintf(stderr, "kwire %s: writing NDJSON because stdout is not a terminal: --text for the report, --json to say so and not see this\n", cmd)
	}
}

// parseFlags parses args. -h prints the help to stdout and returns
// flag.ErrHelp (exit 0); a bad flag, which the flag package has already
// reported with the usage, returns errUsage (exit 2).
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	usage := fs.Usage
	fs.Usage = func() {} // the flag package's call: printed below, once
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return err
	}
	fs.Usage() // after the flag package's line saying what is wrong
	return errUsage
}

func newFlagSet(name, help string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fs.PrintDefaults()
	}
	return fs
}

func cmdRead(args []string, stdout, stderr io.Writer) error {
	var cf commonFlags
	fs := newFlagSet("read", readHelp, stderr)
	cf.register(fs)
	cf.registerShards(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := cf.checkShards("read", stderr, false); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, "kwire read: no capture file given\n\n")
		fs.Usage()
		return errUsage
	}
	cf.noteNDJSON("read", stdout, stderr)
	return newPipeline(&cf, stdout, true).runFiles(fs.Args(), &cf, false, stderr)
}
