package jsonout

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kwire/kwire/correlate"
)

// TestRemedies: every hazard kind kwire reports (correlate.HazardKinds)
// has a line of what to do in the text report and an entry in
// docs/runbook.md saying what it means, how to confirm it and what to do;
// neither has an entry for a kind that does not exist.
func TestRemedies(t *testing.T) {
	doc, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	parts := regexp.MustCompile(`(?m)^## `).Split(string(doc), -1)
	for _, p := range parts[1:] {
		title, body, _ := strings.Cut(p, "\n")
		sections[strings.TrimSpace(title)] = body
	}
	for _, kind := range correlate.HazardKinds {
		if len(Remedy(kind)) < 40 {
			t.Errorf("%s: no remedy line (%q)", kind, Remedy(kind))
		}
		body, ok := sections[kind]
		if !ok {
			t.Errorf("%s: no \"## %s\" entry in docs/runbook.md", kind, kind)
			continue
		}
		for _, part := range []string{"**Means.**", "**Confirm.**", "**Do.**"} {
			if !strings.Contains(body, part) {
				t.Errorf("docs/runbook.md, %s: no %s paragraph", kind, part)
			}
		}
	}
	for kind := range remedies {
		if !slices.Contains(correlate.HazardKinds, kind) {
			t.Errorf("a remedy for %q, which is no hazard kind", kind)
		}
	}
	for title := range sections {
		if !slices.Contains(correlate.HazardKinds, title) {
			t.Errorf("docs/runbook.md has an entry %q, which is no hazard kind", title)
		}
	}
}
