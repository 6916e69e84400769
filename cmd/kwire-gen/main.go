// Command kwire-gen makes kwire's test captures: it runs scenarios of real
// Kafka clients against a tapped kfake cluster and writes
// <name>.pcapng and <name>.truth.json per scenario.
//
//	kwire-gen -out testdata              # every scenario
//	kwire-gen -out testdata -only group,lossy
//	kwire-gen -out /tmp/kwire-bench -only bulk -size 1GB [-mss 1448]
//	kwire-gen -list
//	kwire-gen -real -out testdata/real [-only r_joins]  # real Kafka 4.4.0 + Java client
//
// With -real it runs internal/realgen's scenarios instead: a real 3-node
// Apache Kafka 4.4.0 cluster and the Java client (make realkafka-deps
// java-driver first; make real-captures does both).
//
// Scenarios marked explicit in -list (bulk) run only when named.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/kwire/kwire/internal/gen"
	"github.com/kwire/kwire/internal/realgen"
)

func main() {
	// Hidden: the generator re-executes itself to run a client in a child
	// process that a scenario can kill or freeze.
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Exit(gen.ChildMain(os.Args[2:]))
	}
	out := flag.String("out", "testdata", "directory to write captures and truth files into")
	only := flag.String("only", "", "comma-separated scenario names to run (default: all)")
	list := flag.Bool("list", false, "list scenarios and exit")
	size := flag.String("size", "", "capture `SIZE` for scenarios that grow to one (bulk), e.g. 1GB, 512MB")
	mss := flag.Int("mss", 0, "TCP payload per packet, e.g. 1448 for an Ethernet MTU (default: each scenario's own)")
	real := flag.Bool("real", false, "run the real-Kafka scenarios (Kafka 4.4.0 cluster, Java client; internal/realgen)")
	keep := flag.Bool("keep", false, "with -real: keep each cluster's directory (broker logs, the truth's readings)")
	flag.Parse()
	if *real {
		if err := runReal(*out, *only, *list, *keep); err != nil {
			fmt.Fprintln(os.Stderr, "kwire-gen:", err)
			os.Exit(1)
		}
		return
	}
	var sizeBytes int64
	if *size != "" {
		var err error
		if sizeBytes, err = parseSize(*size); err != nil {
			fmt.Fprintln(os.Stderr, "kwire-gen:", err)
			os.Exit(2)
		}
	}
	if err := run(*out, *only, *list, sizeBytes, *mss); err != nil {
		fmt.Fprintln(os.Stderr, "kwire-gen:", err)
		os.Exit(1)
	}
}

func run(out, only string, list bool, size int64, mss int) error {
	all := gen.Scenarios()
	if list {
		for _, s := range all {
			doc := s.Doc
			if s.Explicit {
				doc = "(explicit: only with -only) " + doc
			}
			fmt.Printf("%-10s %s\n", s.Name, doc)
		}
		return nil
	}
	var todo []gen.Scenario
	for _, s := range all {
		if !s.Explicit {
			todo = append(todo, s)
		}
	}
	if only != "" {
		todo = nil
		for _, name := range strings.Split(only, ",") {
			s, ok := gen.Lookup(strings.TrimSpace(name))
			if !ok {
				return fmt.Errorf("no scenario %q (see -list)", name)
			}
			todo = append(todo, s)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for _, s := range todo {
		if size > 0 {
			s.Size = size
		}
		if mss > 0 {
			s.Options.MSS = mss
		}
		start := time.Now()
		t, err := gen.Run(ctx, s, out)
		if err != nil {
			return err
		}
		var files []string
		for _, f := range t.Captures {
			files = append(files, fmt.Sprintf("%s (%d packets)", f.File, f.Packets))
		}
		fmt.Printf("%-10s %5.1fs  %s\n", s.Name, time.Since(start).Seconds(), strings.Join(files, ", "))
	}
	return nil
}

// parseSize reads a byte count with an optional unit: 1GB, 512MB, 64k,
// 1g. Units are binary (1GB = 1<<30 bytes).
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	shift := 0
	switch {
	case strings.HasSuffix(t, "K"):
		shift = 10
	case strings.HasSuffix(t, "M"):
		shift = 20
	case strings.HasSuffix(t, "G"):
		shift = 30
	}
	if shift > 0 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad -size %q: use a number with an optional unit, e.g. 1GB or 512MB", s)
	}
	return int64(n * float64(int64(1)<<shift)), nil
}

// runReal runs internal/realgen's scenarios (all, or those named in only).
func runReal(out, only string, list, keep bool) error {
	all := realgen.Scenarios()
	if list {
		for _, s := range all {
			fmt.Printf("%-10s %s\n", s.Name, s.Doc)
		}
		return nil
	}
	todo := all
	if only != "" {
		todo = nil
		for _, name := range strings.Split(only, ",") {
			s, ok := realgen.Lookup(strings.TrimSpace(name))
			if !ok {
				return fmt.Errorf("no real scenario %q (see -real -list)", name)
			}
			todo = append(todo, s)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	for _, s := range todo {
		start := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		t, err := realgen.Run(sctx, s, out, realgen.Options{Logf: logf, KeepDir: keep})
		cancel()
		if err != nil {
			return err
		}
		fmt.Printf("%-10s %5.1fs  %s (%d packets)\n", s.Name, time.Since(start).Seconds(), t.Capture, t.Packets)
	}
	return nil
}
