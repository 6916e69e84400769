package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestHelp: -h prints each command's help once, to stdout, exit 0; a bad
// flag says what is wrong, then the help, once, to stderr, exit 2.
func TestHelp(t *testing.T) {
	for _, cmd := range []string{"read", "analyze", "live"} {
		var out, errb bytes.Buffer
		if code := run([]string{cmd, "-h"}, &out, &errb); code != 0 || strings.Count(out.String(), "Usage: kwire "+cmd) != 1 || errb.Len() != 0 {
			t.Errorf("kwire %s -h: exit %d, %d usages on stdout, stderr %q", cmd, code, strings.Count(out.String(), "Usage: kwire "+cmd), errb.String())
		}
		out.Reset()
		errb.Reset()
		code := run([]string{cmd, "--no-such-flag"}, &out, &errb)
		if code != 2 || !strings.HasPrefix(errb.String(), "flag provided but not defined: -no-such-flag\n") ||
			strings.Count(errb.String(), "Usage: kwire "+cmd) != 1 || out.Len() != 0 {
			t.Errorf("kwire %s --no-such-flag: exit %d, stderr %q", cmd, code, errb.String())
		}
	}
}

// TestVersion: `kwire version` and `kwire --version` print the version
// block to stdout and exit 0 (they printed the usage and exited 2); the
// test binary is built inside the git work tree, so the commit is known
// unless the build was told not to stamp it.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		var out, errb bytes.Buffer
		code := run([]string{arg}, &out, &errb)
		if code != 0 || errb.Len() != 0 || !strings.HasPrefix(out.String(), "kwire ") ||
			!strings.Contains(out.String(), "\n  go:       go1.") || !strings.Contains(out.String(), "\n  commit:   ") {
			t.Errorf("kwire %s: exit %d, stdout %q, stderr %q", arg, code, out.String(), errb.String())
		}
	}
}

// TestSameDefaults: a flag that several commands share has one default
// (--max-reorder-mb was 125 MiB in read, analyze and aggregate, 128 in
// live).
func TestSameDefaults(t *testing.T) {
	re := regexp.MustCompile(`(?m)^  -(max-[a-z-]+) .*\n(?:    .*\n)*?    .*\(default ([^)]*)\)$`)
	seen := map[string]map[string]string{} // flag -> default -> command
	for _, cmd := range []string{"read", "analyze", "live", "aggregate"} {
		var out, errb bytes.Buffer
		run([]string{cmd, "-h"}, &out, &errb)
		for _, m := range re.FindAllStringSubmatch(out.String(), -1) {
			if seen[m[1]] == nil {
				seen[m[1]] = map[string]string{}
			}
			seen[m[1]][m[2]] = cmd
		}
	}
	if len(seen["max-reorder-mb"]) == 0 {
		t.Fatal("no --max-reorder-mb default found in any command's help")
	}
	for flag, defaults := range seen {
		if len(defaults) > 1 {
			t.Errorf("--%s has different defaults across commands: %v", flag, defaults)
		}
	}
}

// TestBrokerSettingsRange: a broker setting kwire is told outside what
// Kafka accepts is a usage error in every command that correlates, named
// with Kafka's range, before anything is read or captured.
func TestBrokerSettingsRange(t *testing.T) {
	for _, args := range [][]string{
		{"read", "x.pcapng"}, {"analyze", "x.pcapng"}, {"live", "-i", "lo"},
		{"aggregate", "--from", "kafka://127.0.0.1:1/kwire"},
	} {
		for _, v := range []string{"1", "11"} {
			var out, errb bytes.Buffer
			code := run(append([]string{args[0], "--share-delivery-limit", v}, args[1:]...), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), "group.share.delivery.count.limit is 2 to 10") {
				t.Errorf("kwire %s --share-delivery-limit %s: exit %d, stderr %q; want a usage error (2) naming Kafka's range", args[0], v, code, errb.String())
			}
		}
	}
}
