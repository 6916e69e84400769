package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestHTMLReport writes kwire analyze --html reports of real captures (a
// rebalance storm, a KIP-848 group on real Kafka, a share group whose
// member was killed holding records, a hanging transaction, an offset
// reset) and reads each in headless Chromium: every generation, member and
// hazard of the analyzer's own summary of the capture is on the page,
// each hazard with its evidence exchanges, every link inside the page
// leads to an element of it, nothing is fetched, and the browser logs no
// error. Screenshots of two are kept (KWIRE_ARTEFACTS, else a temporary
// directory) and logged. It skips without Chromium (make test-deps
// installs it), and fails under CI=true.
func TestHTMLReport(t *testing.T) {
	browser := chromiumCtx(t)
	art := os.Getenv("KWIRE_ARTEFACTS")
	if art == "" {
		art = t.TempDir()
	} else if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file string
		shot       bool
	}{
		{"storm", "h_rebalance_storm.pcapng", true},
		{"kip848", "real/r_848.pcapng", true},
		{"share", "h_share_killed_held.pcapng", false},
		{"txn", "h_hanging_transaction.pcapng", false},
		{"reset", "h_offset_reset.pcapng", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := filepath.Join(t.TempDir(), c.name+".html")
			out := runKwire(t, "analyze", "--json", "--html", page, filepath.Join(testdataDir(), c.file))
			want := summaryOf(t, out)
			if len(want.Groups)+len(want.Hazards) == 0 {
				t.Fatal("the summary has no group and no hazard: nothing to look for")
			}
			shot := ""
			if c.shot {
				shot = filepath.Join(art, "report-"+c.name+".png")
			}
			got := readReport(t, browser, page, shot)
			checkReport(t, want, got)
			if shot != "" {
				t.Logf("screenshot: %s", shot)
			}
		})
	}
}

// TestHTMLReportSame: a capture's report is the same every time (offline
// runs are deterministic) and opens offline: no address outside the page.
func TestHTMLReportSame(t *testing.T) {
	dir := t.TempDir()
	var pages [2][]byte
	for i := range pages {
		p := filepath.Join(dir, fmt.Sprintf("%d.html", i))
		runKwire(t, "analyze", "--json", "--html", p, filepath.Join(testdataDir(), "g_848.pcapng"))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pages[i] = b
	}
	if !bytes.Equal(pages[0], pages[1]) {
		t.Error("two reports of one capture differ")
	}
	for _, bad := range []string{"http://", "https://", "<link", "src="} {
		if i := bytes.Index(pages[0], []byte(bad)); i >= 0 && !bytes.HasPrefix(pages[0][i:], []byte("http://www.w3.org/2000/svg")) {
			t.Errorf("the page refers outside itself: %q at byte %d", bad, i)
		}
	}
}

// reportSummary is what the checks read of kwire's summary line.
type reportSummary struct {
	Groups []struct {
		Group       string `json:"group"`
		Generations []struct {
			Generation int32 `json:"generation"`
		} `json:"generations"`
		Members []struct {
			MemberID string `json:"member_id"`
		} `json:"members"`
	} `json:"groups"`
	Hazards []reportHazard `json:"hazards"`
}

type reportHazard struct {
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	Group    string `json:"group"`
	Summary  string `json:"summary"`
	Evidence []struct {
		API           string `json:"api"`
		CorrelationID int32  `json:"correlation_id"`
		Conn          struct {
			ID uint64 `json:"id"`
		} `json:"conn"`
	} `json:"evidence"`
}

func summaryOf(t *testing.T, out []byte) *reportSummary {
	t.Helper()
	var s reportSummary
	summaryLine(t, out, &s)
	return &s
}

// summaryLine decodes the summary line of kwire's NDJSON output into v.
func summaryLine(t *testing.T, out []byte, v any) {
	t.Helper()
	for _, l := range bytes.Split(out, []byte("\n")) {
		if !bytes.Contains(l, []byte(`"type":"summary"`)) {
			continue
		}
		if err := json.Unmarshal(l, v); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no summary line")
}

// pageFacts is what the browser found on the page.
type pageFacts struct {
	Groups []struct {
		Group       string   `json:"group"`
		Generations []int32  `json:"generations"`
		Members     []string `json:"members"`
	} `json:"groups"`
	Hazards []struct {
		ID, Kind, Severity, Group, Summary string
		Evidence                           []string
		Markers                            int
	} `json:"hazards"`
	BrokenLinks []string `json:"brokenLinks"`
	Resources   int      `json:"resources"`
	Figures     int      `json:"figures"`
}

// pageScript collects pageFacts from the DOM.
const pageScript = `(() => {
  const all = (root, sel) => [...root.querySelectorAll(sel)];
  return {
    groups: all(document, "section.group").map(s => ({
      group: s.dataset.group,
      generations: all(s, "tr[data-generation]").map(r => +r.dataset.generation),
      members: all(s, "tr[data-member-id]").map(r => r.dataset.memberId),
    })),
    hazards: all(document, "article.hazard").map(a => ({
      ID: a.id, Kind: a.dataset.kind, Severity: a.dataset.severity, Group: a.dataset.group,
      Summary: a.querySelector("p.summary").textContent,
      Evidence: all(a, ".evidence li").map(li => li.dataset.api + " " + li.dataset.conn + " " + li.dataset.correlationId),
      Markers: all(document, 'svg a[href="#' + a.id + '"]').length,
    })),
    brokenLinks: all(document, 'a[href^="#"]').map(a => a.getAttribute("href").slice(1))
      .filter(id => !document.getElementById(decodeURIComponent(id))),
    resources: performance.getEntriesByType("resource").length,
    figures: all(document, "svg.fig").length,
  };
})()`

func checkReport(t *testing.T, want *reportSummary, got *pageFacts) {
	t.Helper()
	if len(got.BrokenLinks) > 0 {
		t.Errorf("links to no element of the page: %v", got.BrokenLinks)
	}
	if got.Resources > 0 {
		t.Errorf("the page fetched %d resources: it must open offline", got.Resources)
	}
	if got.Figures == 0 {
		t.Error("no figure on the page")
	}
	pageGroups := map[string]int{}
	for i, g := range got.Groups {
		pageGroups[g.Group] = i
	}
	for _, g := range want.Groups {
		i, ok := pageGroups[g.Group]
		if !ok {
			t.Errorf("group %s: not on the page", g.Group)
			continue
		}
		pg := got.Groups[i]
		for _, gen := range g.Generations {
			if !slices.Contains(pg.Generations, gen.Generation) {
				t.Errorf("group %s: generation %d not on the page (page: %v)", g.Group, gen.Generation, pg.Generations)
			}
		}
		for _, m := range g.Members {
			if !slices.Contains(pg.Members, m.MemberID) {
				t.Errorf("group %s: member %s not on the page", g.Group, m.MemberID)
			}
		}
	}
	if len(got.Hazards) != len(want.Hazards) {
		t.Fatalf("%d hazards on the page, the summary has %d", len(got.Hazards), len(want.Hazards))
	}
	for i, w := range want.Hazards {
		g := got.Hazards[i]
		if g.Kind != w.Kind || g.Severity != w.Severity || g.Group != w.Group || g.Summary != w.Summary {
			t.Errorf("hazard %d: page %s %s %s %q, summary %s %s %s %q", i+1, g.Severity, g.Kind, g.Group, g.Summary,
				w.Severity, w.Kind, w.Group, w.Summary)
		}
		var ev []string
		for _, e := range w.Evidence {
			ev = append(ev, fmt.Sprintf("%s %d %d", e.API, e.Conn.ID, e.CorrelationID))
		}
		if !slices.Equal(g.Evidence, ev) {
			t.Errorf("hazard %d (%s): evidence on the page %v, in the summary %v", i+1, w.Kind, g.Evidence, ev)
		}
		if g.Markers == 0 {
			t.Errorf("hazard %d (%s): no figure marks it", i+1, w.Kind)
		}
	}
}

// readReport opens page in the browser, collects pageFacts, fails on any
// error or warning the browser logs (console, uncaught exceptions, its
// own log: a resource that failed to load), and writes a full-page
// screenshot (PNG) to shot, when not "".
func readReport(t *testing.T, browser context.Context, page, shot string) *pageFacts {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	ctx, cancelTime := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTime()
	var mu sync.Mutex
	var errs []string
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == "error" || e.Type == "warning" || e.Type == "assert" {
				errs = append(errs, fmt.Sprintf("console.%s (%d arguments)", e.Type, len(e.Args)))
			}
		case *runtime.EventExceptionThrown:
			errs = append(errs, fmt.Sprintf("exception: %s at %d:%d", e.ExceptionDetails.Text,
				e.ExceptionDetails.LineNumber, e.ExceptionDetails.ColumnNumber))
		case *log.EventEntryAdded:
			if e.Entry.Level == "error" || e.Entry.Level == "warning" {
				errs = append(errs, fmt.Sprintf("log %s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitReady(chromedp.CSS("footer"))); err != nil {
		t.Fatalf("chromium: open %s: %v", page, err)
	}
	facts, err := chromedp.Run(ctx, chromedp.Evaluate[pageFacts](pageScript))
	if err != nil {
		t.Fatalf("chromium: read the page: %v", err)
	}
	if shot != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("chromium: screenshot: %v", err)
		}
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs {
		t.Errorf("the browser logged: %s", e)
	}
	return &facts
}

// chromiumCtx starts headless Chromium for a test, or skips it (fails
// it under CI=true) when there is none.
func chromiumCtx(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		why := "no chromium: the HTML report tests read the page in headless Chromium (make test-deps installs Debian's chromium)"
		if ci := os.Getenv("CI"); ci != "" && !strings.EqualFold(ci, "false") {
			t.Fatal("CI is set: " + why)
		}
		t.Skip(why)
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path),
		chromedp.NoSandbox, // root (CI) has no user namespace sandbox
		chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancel := chromedp.NewContext(alloc)
	if err := chromedp.Do(browser); err != nil { // start it once for every page
		cancel()
		cancelAlloc()
		t.Fatalf("start %s: %v", path, err)
	}
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return browser
}
