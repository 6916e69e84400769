package aggregate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/internal/version"
)

// asFormat4 is batch value (format 6) as an agent of format 4 wrote it:
// the same header and items without the agent's build (aggregate/wire's
// TestOldFormatsDecode reads batches that kwire wrote).
func asFormat4(t testing.TB, value []byte) []byte {
	t.Helper()
	if value[0] != wire.Version || wire.Version != 6 {
		t.Fatalf("batch of format %d, this build writes %d: asFormat4 knows 6", value[0], wire.Version)
	}
	at := 1
	skip := func(str bool) {
		n, k := binary.Uvarint(value[at:])
		at += k
		if str {
			at += int(n)
		}
	}
	skip(true)  // host
	skip(false) // run
	skip(false) // seq
	head := at
	skip(true) // kwire version
	skip(true) // kwire commit
	out := append([]byte{4}, value[1:head]...)
	return append(out, value[at:]...)
}

// TestAggregateLineKwire: the aggregate line lists each agent's kwire (an
// agent of format 4 does not say: no kwire), counts a newer agent's
// batches apart from corrupt ones and says on stderr what to do.
func TestAggregateLineKwire(t *testing.T) {
	b0 := version.Build{Version: "v1.4.0", Commit: "3f86b30a1c2e4d5f6a7b8c9d0e1f2a3b4c5d6e7f"}
	v0 := agentBatchesOf(t, "g_xbroker.b0.pcapng", wire.Agent{Host: "b0", Run: 1}, 0, b0)
	v1 := agentBatches(t, "g_xbroker.b1.pcapng", wire.Agent{Host: "b1", Run: 2}, 0)
	for i := range v1 {
		v1[i] = asFormat4(t, v1[i])
	}
	newer := agentBatchesOf(t, "g_xbroker.b2.pcapng", wire.Agent{Host: "b2", Run: 3}, 0, version.Build{Version: "v9.0.0"})
	for _, v := range newer {
		v[0] = wire.VersionSigned + 1
	}
	values := interleave(v0, v1, newer)

	for _, text := range []bool{false, true} {
		var stderr bytes.Buffer
		out, _ := runValues(t, &Options{Stderr: &stderr, Text: text}, values)
		if text {
			want := "aggregate: agents' kwire: unknown (1), v1.4.0+3f86b30a1c2e (1); " + strconv.Itoa(len(newer)) + " batches of a newer format dropped: upgrade this aggregator"
			if !strings.Contains(out, want) {
				t.Errorf("text output does not say %q:\n%s", want, out)
			}
			continue
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var l Line
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &l); err != nil || l.Type != "aggregate" {
			t.Fatalf("last line %s: %v", lines[len(lines)-1], err)
		}
		if len(l.Agents) != 2 || l.Agents[0].Kwire == nil || *l.Agents[0].Kwire != b0 || l.Agents[1].Kwire != nil ||
			l.Agents[1].Batches != uint64(len(v1)) {
			t.Errorf("agents %s, want b0 of kwire %+v and b1 of none said, its %d batches read", jsonOf(l.Agents), b0, len(v1))
		}
		if l.NewerFormat != int64(len(newer)) || l.Corrupt != 0 {
			t.Errorf("newer_format_batches %d, corrupt_batches %d: want %d and 0", l.NewerFormat, l.Corrupt, len(newer))
		}
		if !strings.Contains(lines[len(lines)-1], `"kwire":{"version":"v1.4.0","commit":"3f86b30a1c2e4d5f6a7b8c9d0e1f2a3b4c5d6e7f"}`) {
			t.Errorf("aggregate line %s does not list b0's kwire", lines[len(lines)-1])
		}
		said := stderr.String()
		if n := strings.Count(said, "agent b2 (kwire v9.0.0) publishes batches of format 8"); n != 1 || !strings.Contains(said, "upgrade the aggregator") {
			t.Errorf("stderr said it %d times (want once, with what to do):\n%s", n, said)
		}
	}
}

// TestRouterKeepsAgentKwire: kwire aggregate --group's router re-encodes
// each item alone: the batch it makes says the agent's kwire, not the
// router's, so that the instances' aggregate lines list the agents'.
func TestRouterKeepsAgentKwire(t *testing.T) {
	b0 := version.Build{Version: "v1.4.0", Commit: "3f86b30a1c2e", Modified: true}
	values := agentBatchesOf(t, "g_xbroker.b0.pcapng", wire.Agent{Host: "b0", Run: 1}, 0, b0)
	b, err := wire.Decode(values[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rt := range newRouter(4).route(b, 0, 0) {
		for _, ri := range rt.Items {
			got, err := wire.Decode(ri.Batch, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Kwire != b0 {
				t.Fatalf("routed item says kwire %+v, want the agent's %+v", got.Kwire, b0)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("nothing routed")
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
