package main

import (
	"io"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/kwire/kwire/tui"
)

// BenchmarkAnalyzeTUI compares, on the capture named by
// KWIRE_BENCH_CAPTURE, `kwire analyze --json > /dev/null` (ui=off) with
// `kwire analyze --tui --replay=fast` (ui=on: frames every 250ms of wall
// time, the UI drawing them on a 200x60 simulation screen on its own
// goroutine) until the files end. The UI must not slow the pipeline: the
// two MB/s should be the same. On a busy machine prefer TestTUIKeepsUp,
// which alternates the two.
func BenchmarkAnalyzeTUI(b *testing.B) {
	path := os.Getenv("KWIRE_BENCH_CAPTURE")
	if path == "" {
		b.Skip("KWIRE_BENCH_CAPTURE is not set: run `make bench` (or `make bench-capture` and point it at the file)")
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Skipf("KWIRE_BENCH_CAPTURE=%s: %v (make bench-capture writes it)", path, err)
	}
	var cf commonFlags
	fs := newFlagSet("analyze", "", io.Discard)
	cf.register(fs)
	var tf tuiFlags
	tf.register(fs)
	args := []string{"--tui"}
	if p := os.Getenv("KWIRE_BENCH_PORTS"); p != "" {
		args = append(args, "--port", p)
	}
	if err := fs.Parse(args); err != nil {
		b.Fatal(err)
	}
	b.Run("ui=off", func(b *testing.B) {
		off := []string{"analyze", "--json"}
		off = append(append(off, args[1:]...), path)
		b.SetBytes(fi.Size())
		b.ReportAllocs()
		for b.Loop() {
			if code := run(off, io.Discard, os.Stderr); code != 0 {
				b.Fatalf("kwire %v: exit status %d", off, code)
			}
		}
	})
	b.Run("ui=on", func(b *testing.B) { benchTUI(b, &cf, &tf, path, fi.Size()) })
}

func benchTUI(b *testing.B, cf *commonFlags, tf *tuiFlags, path string, size int64) {
	b.SetBytes(size)
	b.ReportAllocs()
	var frames int64
	for b.Loop() {
		sim := tcell.NewSimulationScreen("UTF-8")
		sim.SetSize(200, 60)
		p := newPipeline(cf, io.Discard, false)
		err := p.replayTUI([]string{path}, cf, tf, sim, func(ui *tui.UI) { ui.Stop() })
		if err != nil {
			b.Fatal(err)
		}
		frames += p.tap.(*tui.Feed).Published()
	}
	b.ReportMetric(float64(frames)/float64(b.N), "frames/op")
}

// TestTUIKeepsUp is issue 7's "keeping up" check on the capture named by
// KWIRE_BENCH_CAPTURE (skipped without it): runs without the UI (kwire
// analyze --json > /dev/null) and with it (--tui --replay=fast, drawing
// on a simulation screen) alternate, KWIRE_BENCH_ROUNDS times (default 3),
// so that both see the same machine load. The best run with the UI must
// be within 10% of the best without (wall time: run it on a quiet
// machine); it logs wall and CPU MB/s and context switches.
func TestTUIKeepsUp(t *testing.T) {
	path := os.Getenv("KWIRE_BENCH_CAPTURE")
	if path == "" {
		t.Skip("KWIRE_BENCH_CAPTURE is not set: point it at a large capture (make bench-capture writes one)")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Skipf("KWIRE_BENCH_CAPTURE=%s: %v", path, err)
	}
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("KWIRE_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	var ports []string
	if p := os.Getenv("KWIRE_BENCH_PORTS"); p != "" {
		ports = []string{"--port", p}
	}
	off := func() {
		args := append(append([]string{"analyze", "--json"}, ports...), path)
		if code := run(args, io.Discard, os.Stderr); code != 0 {
			t.Fatalf("kwire %v: exit status %d", args, code)
		}
	}
	var frames int64
	on := func() {
		var cf commonFlags
		var tf tuiFlags
		fs := newFlagSet("analyze", "", io.Discard)
		cf.register(fs)
		tf.register(fs)
		if err := fs.Parse(append([]string{"--tui"}, ports...)); err != nil {
			t.Fatal(err)
		}
		sim := tcell.NewSimulationScreen("UTF-8")
		sim.SetSize(200, 60)
		p := newPipeline(&cf, io.Discard, false)
		if err := p.replayTUI([]string{path}, &cf, &tf, sim, func(ui *tui.UI) { ui.Stop() }); err != nil {
			t.Fatal(err)
		}
		frames = p.tap.(*tui.Feed).Published()
	}
	mb := float64(fi.Size()) / 1e6
	best := map[string]time.Duration{}
	for i := range rounds {
		for _, c := range []struct {
			name string
			f    func()
		}{{"ui=off", off}, {"ui=on", on}} {
			u0, t0 := procUsage(t), time.Now()
			c.f()
			wall, u1 := time.Since(t0), procUsage(t)
			cpu := u1.cpu - u0.cpu
			t.Logf("round %d %s: %.0f MB/s wall, %.0f MB/s per CPU second (%.1fs wall, %.1fs CPU, %d+%d context switches)", i+1, c.name,
				mb/wall.Seconds(), mb/cpu.Seconds(), wall.Seconds(), cpu.Seconds(), u1.vcsw-u0.vcsw, u1.ivcsw-u0.ivcsw)
			if b, ok := best[c.name]; !ok || wall < b {
				best[c.name] = wall
			}
		}
	}
	offMB, onMB := mb/best["ui=off"].Seconds(), mb/best["ui=on"].Seconds()
	t.Logf("best: %.0f MB/s without the UI, %.0f MB/s with it (%d frames drawn from)", offMB, onMB, frames)
	if onMB < 0.9*offMB {
		t.Errorf("with the UI the pipeline runs at %.0f MB/s, below 90%% of %.0f MB/s without", onMB, offMB)
	}
}

// rusage is what the process used so far: user + system CPU time,
// voluntary and involuntary context switches.
type rusage struct {
	cpu         time.Duration
	vcsw, ivcsw int64
}

func procUsage(t *testing.T) rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return rusage{time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw, ru.Nivcsw}
}
