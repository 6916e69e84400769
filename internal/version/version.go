// Package version says which kwire is running: the version, the commit
// and its date, and the Go toolchain, read from the build's own metadata
// (runtime/debug.ReadBuildInfo: the module version for `go install
// ...@vX`, the vcs.* settings that `go build` stamps inside a git work
// tree) or set at link time with
//
//	-ldflags "-X github.com/kwire/kwire/internal/version.version=v1.2.3
//	          -X github.com/kwire/kwire/internal/version.commit=<sha>
//	          -X github.com/kwire/kwire/internal/version.date=<RFC 3339>"
//
// (the Makefile does, from git). It is what `kwire version`
// prints, what the kwire_build_info metric carries and what agents put in
// their batches, so a bug report can say exactly what ran.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// version, commit and date are set by the linker (-X); empty means "read
// it from the build info". The Makefile sets all three from git, since
// vcs stamping is off wherever GOFLAGS has -buildvcs=false (as on the
// project's machines).
var version, commit, date string

// Info is what one kwire binary knows about itself.
type Info struct {
	// Version is a release tag (v1.2.3), `git describe` output, or
	// "devel" when nothing better is known.
	Version string `json:"version"`
	// Commit is the full revision the binary was built from ("" when
	// unknown: built outside a git work tree with -buildvcs=false).
	Commit string `json:"commit,omitempty"`
	// Date is the commit's time (RFC 3339, UTC), not the build's: builds
	// of one commit are then alike.
	Date string `json:"date,omitempty"`
	// Modified says the work tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// Go is the toolchain that built the binary (runtime.Version).
	Go string `json:"go"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Build names a build: Info without the toolchain and platform, so that
// output carrying it (the NDJSON stats line, the agents' batches) is the
// same for one commit whatever Go built it.
type Build struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

// Build returns in's Build.
func (in Info) Build() Build {
	return Build{Version: in.Version, Commit: in.Commit, Modified: in.Modified}
}

// String is b as one word: the version, and "+" and the commit's first 12
// digits when known ("+dirty" after them when modified): "v1.2.3",
// "devel+3f86b30a1c2e+dirty".
func (b Build) String() string {
	s := b.Version
	if s == "" {
		s = "unknown"
	}
	if c := b.Commit; c != "" {
		s += "+" + c[:min(len(c), 12)]
		if b.Modified {
			s += "+dirty"
		}
	}
	return s
}

var (
	once sync.Once
	info Info
)

// Get returns this binary's Info. It is computed once.
func Get() Info {
	once.Do(func() {
		bi, _ := debug.ReadBuildInfo()
		info = fromBuild(bi, version)
		if commit != "" {
			c, dirty := strings.CutSuffix(commit, "-dirty")
			info.Commit, info.Date, info.Modified = c, date, dirty
		}
	})
	return info
}

// fromBuild builds an Info from build metadata (nil when the binary has
// none) and a link-time version ("" when not set).
func fromBuild(bi *debug.BuildInfo, linked string) Info {
	in := Info{Version: linked, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		if in.Version == "" {
			in.Version = "devel"
		}
		return in
	}
	if bi.GoVersion != "" {
		in.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.Date = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	if in.Version == "" {
		// "(devel)" is what go build says of the main module inside its
		// own work tree; a real module version comes from go install.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			in.Version = v
		} else {
			in.Version = "devel"
		}
	}
	return in
}

// Short is Info in one line: "kwire v1.2.3 (commit 3f86b30a1c2e, 2026-12-06,
// go1.26.8 linux/amd64)".
func (in Info) Short() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kwire %s (", in.Version)
	if in.Commit != "" {
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		fmt.Fprintf(&b, "commit %s", c)
		if in.Modified {
			b.WriteString("+dirty")
		}
		if d, _, ok := strings.Cut(in.Date, "T"); ok {
			fmt.Fprintf(&b, ", %s", d)
		}
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "%s %s)", in.Go, in.Platform)
	return b.String()
}

// Long is Info over several lines, as `kwire version` prints it.
func (in Info) Long() string {
	commit := in.Commit
	if commit == "" {
		commit = "unknown (built without version control information)"
	} else if in.Modified {
		commit += " (work tree had uncommitted changes)"
	}
	date := in.Date
	if date == "" {
		date = "unknown"
	}
	return fmt.Sprintf("kwire %s\n  commit:   %s\n  date:     %s\n  go:       %s\n  platform: %s\n",
		in.Version, commit, date, in.Go, in.Platform)
}
