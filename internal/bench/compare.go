package bench

import (
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Compare runs each available command rounds times, interleaved (round 1
// runs every command once, in order, then round 2...). A command whose
// Probe fails, or whose program is not installed, is left out and named in
// notes. progress, if not nil, gets a line per run.
func Compare(cmds []Command, v Vars, rounds int, progress io.Writer) (results []Result, notes []string, err error) {
	if progress == nil {
		progress = io.Discard
	}
	type ready struct {
		cmd  Command
		argv []string
	}
	var todo []ready
	for _, c := range cmds {
		argv, err := v.Expand(c.Argv)
		if err != nil {
			return nil, nil, err
		}
		if _, err := exec.LookPath(argv[0]); err != nil {
			notes = append(notes, fmt.Sprintf("%s: left out, %s is not installed", c.Name, argv[0]))
			continue
		}
		if c.Probe != nil {
			probe, err := v.Expand(c.Probe)
			if err != nil {
				return nil, nil, err
			}
			if _, err := Measure(probe); err != nil {
				notes = append(notes, fmt.Sprintf("%s: left out, `%s` fails", c.Name, strings.Join(probe, " ")))
				continue
			}
		}
		todo = append(todo, ready{c, argv})
		results = append(results, Result{Command: c})
	}
	for round := 1; round <= rounds; round++ {
		for i, t := range todo {
			run, err := Measure(t.argv)
			if err != nil {
				return nil, notes, err
			}
			results[i].Runs = append(results[i].Runs, run)
			fmt.Fprintf(progress, "round %d/%d  %-14s %7.2fs  max RSS %4d MiB\n",
				round, rounds, t.cmd.Name, run.Wall.Seconds(), run.MaxRSSKiB>>10)
		}
	}
	return results, notes, nil
}

// Table writes results as a Markdown table: per command its median run's
// MB/s (1 MB = 10^6 bytes, as go test reports) and Kafka frames/s, CPU
// time, the largest max RSS, and its speed relative to cat and to tshark
// (when they were run).
func Table(w io.Writer, results []Result, size, frames int64) error {
	mbps := func(r *Result) float64 { return float64(size) / 1e6 / r.Median().Wall.Seconds() }
	base := map[string]float64{}
	for i := range results {
		base[results[i].Command.Name] = mbps(&results[i])
	}
	ratio := func(r *Result, to string) string {
		b, ok := base[to]
		if !ok {
			return "—"
		}
		return fmt.Sprintf("%.2fx", mbps(r)/b)
	}
	var b strings.Builder
	b.WriteString("| command | runs | median s | MB/s | frames/s | CPU s | max RSS MiB | vs cat | vs tshark |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i := range results {
		r := &results[i]
		m := r.Median()
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.0f | %.0f | %.2f | %d | %s | %s |\n",
			r.Command.Name, len(r.Runs), m.Wall.Seconds(), mbps(r),
			float64(frames)/m.Wall.Seconds(), (m.User + m.Sys).Seconds(), r.MaxRSSKiB()>>10,
			ratio(r, "cat"), ratio(r, "tshark"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
