// Command kwire-gen makes kwire's test captures: it runs scenarios of real
// Kafka clients against a tapped kfake cluster and writes
// <name>.pcapng and <name>.truth.json per scenario.
//
//	kwire-gen -out testdata              # every scenario
//	kwire-gen -out testdata -only group,lossy
//	kwire-gen -list
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/kwire/kwire/internal/gen"
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
	flag.Parse()
	if err := run(*out, *only, *list); err != nil {
		fmt.Fprintln(os.Stderr, "kwire-gen:", err)
		os.Exit(1)
	}
}

func run(out, only string, list bool) error {
	all := gen.Scenarios()
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
