//go:build linux

package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// publishLineRE is the agent's publishing line on stderr.
var publishLineRE = regexp.MustCompile(`kwire: publish: (\d+) batches .* (\d+) own connections not analysed`)

// TestLiveOwnPublishTraffic: an agent that publishes to the cluster it
// captures (kwire live -i lo --publish to the same kfake) leaves its own
// connections out: every exchange line is the application's, none is the
// agent's producer's (whose Produce would otherwise be captured,
// published, captured again...), and the publishing line counts the
// connections left out.
func TestLiveOwnPublishTraffic(t *testing.T) {
	needCapture(t)
	kf, ports := newCluster(t, kfake.SeedTopics(1, "kwire"), kfake.SeedTopics(3, "app-topic"))
	live := startLive(t, "-i", "lo", "--port", ports, "--json", "--exchanges", "--stats-every", "1s",
		"--publish", "kafka://"+strings.Join(kf.ListenAddrs(), ",")+"/kwire", "--publish-agent", "self")
	if !strings.Contains(live.stderr.String(), "its own connections left out of the capture") {
		t.Errorf("the status line does not say the agent's connections are left out:\n%s", live.stderr.String())
	}

	app := newClient(t, kf, kgo.ClientID("app"), kgo.DefaultProduceTopic("app-topic"))
	for i := range 20 {
		if err := app.ProduceSync(context.Background(), &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	app.Close()
	// kwire saw the application's 20 Produce exchanges, and the agent
	// has published (what it captured of the application) since.
	live.stdout.wait(t, "the application's Produce exchanges", func() bool {
		return strings.Count(live.stdout.buf.String(), `"api":"Produce"`) >= 20
	})
	n := len(publishLineRE.FindAllString(live.stderr.String(), -1))
	live.stderr.wait(t, "the agent to deliver batches", func() bool {
		m := publishLineRE.FindAllStringSubmatch(live.stderr.buf.String(), -1)
		return len(m) > n+1 && m[len(m)-1][1] != "0"
	})
	if code := live.stop(t); code != 0 {
		t.Fatalf("kwire live exited %d: %s", code, live.stderr.String())
	}

	clients := map[string]int{}
	for _, line := range nonStats(live.stdout.String()) {
		var e struct {
			Type     string `json:"type"`
			ClientID string `json:"client_id"`
		}
		json.Unmarshal([]byte(line), &e)
		if e.Type == "exchange" {
			clients[e.ClientID]++
		}
	}
	if clients["app"] == 0 || len(clients) != 1 {
		t.Errorf("exchanges per client id %v: want the application's (app) only, none of the agent's producer (kgo)", clients)
	}
	m := publishLineRE.FindAllStringSubmatch(live.stderr.String(), -1)
	if len(m) == 0 || m[len(m)-1][2] == "0" {
		t.Errorf("the last publishing line does not count the agent's connections left out:\n%s", live.stderr.String())
	}
}
