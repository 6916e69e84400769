package captest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// External returns the path of name in the public captures of other
// projects, ../shared/external-captures beside the repository (their
// README says where each came from; the project commits no copy of them).
// From a git worktree, the folder beside the main checkout will do.
// $KWIRE_EXTERNAL_CAPTURES names another folder. The test is skipped,
// saying why, when the capture is not there, as in a clone without it.
func External(tb testing.TB, name string) string {
	tb.Helper()
	var dirs []string
	if d := os.Getenv("KWIRE_EXTERNAL_CAPTURES"); d != "" {
		dirs = append(dirs, d)
	} else if root, ok := repoRoot(); ok {
		dirs = append(dirs, filepath.Join(root, "..", "shared", "external-captures"))
		if main, ok := mainCheckout(root); ok {
			dirs = append(dirs, filepath.Join(main, "..", "shared", "external-captures"))
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	tb.Skipf("external capture %s not found in %q: these tests read the public captures in ../shared/external-captures beside the repository, or in $KWIRE_EXTERNAL_CAPTURES", name, dirs)
	return ""
}

// repoRoot is the directory of go.mod, from the test's directory up.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

// mainCheckout is the main working tree of a git worktree at root: its
// .git is a file naming <main>/.git/worktrees/<name>.
func mainCheckout(root string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(root, ".git"))
	if err != nil {
		return "", false
	}
	gitdir := strings.TrimSpace(strings.TrimPrefix(string(b), "gitdir:"))
	i := strings.LastIndex(gitdir, string(filepath.Separator)+".git"+string(filepath.Separator)+"worktrees"+string(filepath.Separator))
	if i < 0 {
		return "", false
	}
	return gitdir[:i], true
}
