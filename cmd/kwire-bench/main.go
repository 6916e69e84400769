// Command kwire-bench times kwire against cat and tshark on one capture
// (issue 8's harness; make bench-compare runs it):
//
//	kwire-bench -kwire bin/kwire -ports 29092-29094 /tmp/kwire-bench/bulk-1g.pcapng
//	kwire-bench -cmd 'zcat=zcat -f {file}' FILE     # compare one more command
//	kwire-bench -skip tshark FILE                   # leave tshark out (make bench-rss)
//
// Every command runs once per round, rounds interleaved, stdout on
// /dev/null; the table gives MB/s and Kafka frames/s of the median run,
// max RSS, and each command's speed relative to cat and tshark.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/kwire/kwire/internal/bench"
)

// cmdFlags collects -cmd NAME=ARGV flags.
type cmdFlags []bench.Command

func (c *cmdFlags) String() string { return "" }

func (c *cmdFlags) Set(s string) error {
	name, argv, ok := strings.Cut(s, "=")
	if !ok || name == "" || len(strings.Fields(argv)) == 0 {
		return errors.New("want NAME=COMMAND ARGS, e.g. 'zcat=zcat -f {file}'")
	}
	*c = append(*c, bench.Command{Name: name, Argv: strings.Fields(argv)})
	return nil
}

func main() {
	kwire := flag.String("kwire", "bin/kwire", "kwire `BINARY` to time")
	ports := flag.String("ports", "9092", "broker `PORTS` of the capture (kwire --port; tshark -d per port)")
	rounds := flag.Int("rounds", 3, "runs of each command, interleaved")
	skip := flag.String("skip", "", "comma-separated `NAMES` of default commands to leave out, e.g. tshark")
	var extra cmdFlags
	flag.Var(&extra, "cmd", "one more command to time, `NAME=ARGV` with {file}, {kwire}, {ports} (repeatable)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: kwire-bench [flags] CAPTURE\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *rounds < 1 {
		flag.Usage()
		os.Exit(2)
	}
	cmds, err := defaults(*skip)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kwire-bench:", err)
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *kwire, *ports, *rounds, append(cmds, extra...)); err != nil {
		fmt.Fprintln(os.Stderr, "kwire-bench:", err)
		os.Exit(1)
	}
}

// defaults returns bench.Default without the commands named in skip.
func defaults(skip string) ([]bench.Command, error) {
	left := map[string]bool{}
	for _, n := range strings.Split(skip, ",") {
		if n = strings.TrimSpace(n); n != "" {
			left[n] = true
		}
	}
	var out []bench.Command
	for _, c := range bench.Default {
		if left[c.Name] {
			delete(left, c.Name)
			continue
		}
		out = append(out, c)
	}
	for n := range left {
		return nil, fmt.Errorf("-skip %q: not a default command (cat, kwire read, kwire analyze, tshark)", n)
	}
	return out, nil
}

func run(file, kwire, ports string, rounds int, cmds []bench.Command) error {
	fi, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("%w (make bench-capture writes the capture)", err)
	}
	v := bench.Vars{File: file, Kwire: kwire, Ports: ports}
	// Untimed: counts the frames and warms the page cache for everyone.
	frames, err := bench.KafkaFrames(v)
	if err != nil {
		return err
	}
	results, notes, err := bench.Compare(cmds, v, rounds, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Printf("\n%s: %.1f MB, %d Kafka frames (kwire's count); %d rounds interleaved; %d CPUs, %s\n\n",
		file, float64(fi.Size())/1e6, frames, rounds, runtime.NumCPU(), runtime.Version())
	if err := bench.Table(os.Stdout, results, fi.Size(), frames); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Println("note:", n)
	}
	return nil
}
