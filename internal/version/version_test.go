package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuild(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "3f86b30a1c2e4d5f6a7b8c9d0e1f2a3b4c5d6e7f"},
		{Key: "vcs.time", Value: "2026-12-06T21:14:03Z"},
		{Key: "vcs.modified", Value: "false"},
	}
	for _, tc := range []struct {
		name   string
		bi     *debug.BuildInfo
		linked string
		want   Info
		short  string
		build  string // Build().String()
	}{
		{
			name:  "go build in a work tree",
			bi:    &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			want:  Info{Version: "devel", Commit: "3f86b30a1c2e4d5f6a7b8c9d0e1f2a3b4c5d6e7f", Date: "2026-12-06T21:14:03Z", Go: "go1.26.8"},
			short: "kwire devel (commit 3f86b30a1c2e, 2026-12-06, go1.26.8 ",
			build: "devel+3f86b30a1c2e",
		},
		{
			name:   "linked version wins",
			bi:     &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: append(vcs[:2:2], debug.BuildSetting{Key: "vcs.modified", Value: "true"})},
			linked: "v0.9.0-12-g3f86b30",
			want:   Info{Version: "v0.9.0-12-g3f86b30", Commit: "3f86b30a1c2e4d5f6a7b8c9d0e1f2a3b4c5d6e7f", Date: "2026-12-06T21:14:03Z", Modified: true, Go: "go1.26.8"},
			short:  "kwire v0.9.0-12-g3f86b30 (commit 3f86b30a1c2e+dirty, 2026-12-06, go1.26.8 ",
			build:  "v0.9.0-12-g3f86b30+3f86b30a1c2e+dirty",
		},
		{
			name:  "go install of a tagged module",
			bi:    &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			want:  Info{Version: "v1.2.3", Go: "go1.26.8"},
			short: "kwire v1.2.3 (go1.26.8 ",
			build: "v1.2.3",
		},
		{
			name:  "no build info",
			want:  Info{Version: "devel"},
			build: "devel",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuild(tc.bi, tc.linked)
			if tc.want.Go == "" {
				tc.want.Go = got.Go // runtime.Version: this test's toolchain
			}
			tc.want.Platform = got.Platform
			if got != tc.want {
				t.Errorf("fromBuild:\n got  %+v\n want %+v", got, tc.want)
			}
			if tc.short != "" && !strings.HasPrefix(got.Short(), tc.short) {
				t.Errorf("Short() = %q, want prefix %q", got.Short(), tc.short)
			}
			if !strings.HasPrefix(got.Long(), "kwire "+tc.want.Version+"\n") {
				t.Errorf("Long() = %q", got.Long())
			}
			if b := got.Build(); b.String() != tc.build || b.Version != got.Version || b.Commit != got.Commit || b.Modified != got.Modified {
				t.Errorf("Build() = %+v, String() %q, want %q", b, b.String(), tc.build)
			}
		})
	}
}
