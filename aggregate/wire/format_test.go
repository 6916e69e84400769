package wire

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/internal/version"
)

var t0 = time.Unix(1700000000, 0)

// TestBuildRoundTrip: the agent's kwire build goes through the wire, in
// unsigned and signed batches, dirty or not; a router's encoder gives the
// agent's (SetBuild), not its own.
func TestBuildRoundTrip(t *testing.T) {
	for _, b := range []version.Build{
		{Version: "v1.4.0", Commit: "3f86b30a1c2e4d5f6a7b8c9d0e1f2a3b4c5d6e7f"},
		{Version: "v1.4.0-3-g3f86b30", Commit: "3f86b30a1c2e4d5f6a7b8c9d0e1f2a3b4c5d6e7f", Modified: true},
		{Version: "devel"},
		version.Get().Build(), // NewEncoder's own
	} {
		t.Run(b.String(), func(t *testing.T) {
			e := NewEncoder(Agent{Host: "b1", Run: 9})
			if b != version.Get().Build() {
				e.SetBuild(b)
			}
			e.Reset(3)
			e.Counters(t0, &Counters{})
			unsigned := bytes.Clone(e.Bytes())
			signed := NewSigner(mustKeys(t, "b1 "+hexA)[0]).Sign(bytes.Clone(unsigned))
			if _, err := NewKeyring(mustKeys(t, "b1 "+hexA)).Verify(signed); err != nil {
				t.Fatalf("signed batch does not verify: %v", err)
			}
			for name, value := range map[string][]byte{"unsigned": unsigned, "signed": signed} {
				got, err := Decode(value, nil)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got.Kwire != b || got.Agent != (Agent{Host: "b1", Run: 9}) || got.Seq != 3 || len(got.Items) != 1 {
					t.Errorf("%s: decoded agent %v seq %d kwire %+v with %d items, want b1 seq 3 kwire %+v with 1", name, got.Agent, got.Seq, got.Kwire, len(got.Items), b)
				}
			}
		})
	}
}

// TestOldFormatsDecode: batches an agent of the format before (4, and 5
// signed: committed, written by that kwire from testdata/group.pcapng)
// still decode, to the same items as this format's batches of the same
// capture, with no build (those agents did not say).
func TestOldFormatsDecode(t *testing.T) {
	var old []Item
	for _, f := range []struct {
		file   string
		format byte
	}{{"testdata/old/group.format4.batch", versionV4}, {"testdata/old/group.format5.batch", versionV4Signed}} {
		value, err := os.ReadFile(f.file)
		if err != nil {
			t.Fatal(err)
		}
		if value[0] != f.format {
			t.Fatalf("%s is of format %d, want %d", f.file, value[0], f.format)
		}
		if f.format == versionV4Signed {
			if _, err := NewKeyring(mustKeys(t, "h "+hexA)).Verify(value); err != nil {
				t.Fatalf("%s: %v", f.file, err)
			}
		}
		b, err := Decode(value, nil)
		if err != nil {
			t.Fatalf("%s: %v", f.file, err)
		}
		if b.Kwire != (version.Build{}) || b.Agent.Host != "h" || len(b.Items) == 0 {
			t.Fatalf("%s: agent %v, kwire %+v, %d items", f.file, b.Agent, b.Kwire, len(b.Items))
		}
		old = append(old, b.Items...)
	}
	r := runRoundTrip(t, "../../testdata/group.pcapng", 8<<10)
	var now []Item
	for _, v := range r.values {
		if v[0] != Version {
			t.Fatalf("this build writes format %d, want %d", v[0], Version)
		}
		b, err := Decode(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		if b.Kwire != version.Get().Build() {
			t.Fatalf("batch says kwire %+v, want this build's %+v", b.Kwire, version.Get().Build())
		}
		now = append(now, b.Items...)
	}
	if len(now) < len(old) {
		t.Fatalf("%d items now, %d in the old batches", len(now), len(old))
	}
	for i := range old {
		if !reflect.DeepEqual(old[i], now[i]) {
			t.Fatalf("item %d differs:\nold %+v\nnow %+v", i, old[i], now[i])
		}
	}
}

// TestNewerFormatRefused: a batch of a format this build does not know,
// from a newer agent, is refused (ErrVersion) by Decode and by a keyring,
// with an error naming the agent, its kwire and what to do; a first byte
// of no format at all names no agent.
func TestNewerFormatRefused(t *testing.T) {
	e := NewEncoder(Agent{Host: "b7", Run: 1})
	e.SetBuild(version.Build{Version: "v9.0.0", Commit: "abcdef0123456789"})
	e.Reset(1)
	e.Counters(t0, &Counters{})
	newer := bytes.Clone(e.Bytes())
	newer[0] = VersionSigned + 1 // what follows the header may be anything
	newer = append(newer, 0xff, 0xfe)

	_, decErr := Decode(newer, nil)
	_, verErr := NewKeyring(mustKeys(t, "b7 "+hexA)).Verify(newer)
	for name, err := range map[string]error{"Decode": decErr, "Verify": verErr} {
		var ve *VersionError
		if !errors.Is(err, ErrVersion) || !errors.As(err, &ve) {
			t.Fatalf("%s: %v, want a VersionError", name, err)
		}
		if ve.Agent.Host != "b7" || ve.Kwire.Version != "v9.0.0" || ve.Format != VersionSigned+1 {
			t.Errorf("%s: %+v", name, ve)
		}
		for _, want := range []string{"agent b7 (kwire v9.0.0+abcdef012345) publishes batches of format 8", "reads formats 2 to 7", "upgrade the aggregator"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", name, err, want)
			}
		}
	}
	_, err := Decode([]byte{1, 2, 3}, nil)
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Agent.Host != "" || !strings.Contains(err.Error(), "batch of format 1") {
		t.Errorf("format 1: %v", err)
	}
}
