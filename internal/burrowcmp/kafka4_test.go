package burrowcmp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/internal/gen"
	"github.com/kwire/kwire/internal/realkafka"
)

// TestBurrowKafka4 pins why TestBurrow runs Kafka 3.9: Burrow 1.2.1 asks
// for end offsets with ListOffsets v0 (its cluster module never sets the
// request's version, whatever kafka-version says), Kafka 4.0 removed v0
// (KIP-896), and a 4.4 broker closes the connection instead of answering:
// Burrow knows no end offset, so it stores no commit and evaluates no
// group. kwire reads it from the capture: Burrow's ListOffsets v0, none
// answered. When Debian ships a Burrow that asks with v1 or later, this
// fails: run TestBurrow on Kafka 4.4 then.
func TestBurrowKafka4(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three Kafka JVMs, ZooKeeper and Burrow")
	}
	_, err := Find()
	need(t, err)
	d, err := gen.FindJavaDriver()
	need(t, err)
	kwire := realkafka.BuildKwire(t)
	c := realkafka.StartT(t, &realkafka.Options{Config: map[string]string{"group.initial.rebalance.delay.ms": "0"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID("bw-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createTopic(ctx, t, cl)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("order")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b := startBurrow(ctx, t, c, d.Java)
	// Burrow refreshes end offsets every second: ten tries.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	err = b.waitTopic(wctx, topic, parts)
	wcancel()
	if err == nil {
		t.Fatalf("Burrow got %s's end offsets from Kafka %s: it works with 4.x now, compare on 4.4 in TestBurrow", topic, realkafka.Version4)
	}
	capture := filepath.Join(c.Dir(), "kafka4.pcapng")
	if _, err := c.WritePcapng(capture); err != nil {
		t.Fatal(err)
	}
	asked, answered := burrowListOffsets(t, kwire, capture, c.Ports(realkafka.ListenerPlaintext))
	t.Logf("Burrow on Kafka %s: %v; its ListOffsets by version: %v asked, %v answered", realkafka.Version4, err, asked, answered)
	if asked[0] == 0 || answered[0] != 0 {
		t.Errorf("Burrow's ListOffsets v0: %d asked, %d answered; want some asked, none answered", asked[0], answered[0])
	}
}

// burrowListOffsets counts Burrow's ListOffsets requests in the capture
// by version, as kwire read sees them, and those answered.
func burrowListOffsets(t *testing.T, kwire, capture string, ports []int) (asked, answered map[int]int) {
	t.Helper()
	var ps []string
	for _, p := range ports {
		ps = append(ps, strconv.Itoa(p))
	}
	out, err := exec.Command(kwire, "read", "--json", "--port", strings.Join(ps, ","), capture).Output()
	if err != nil {
		t.Fatalf("kwire read: %v", err)
	}
	asked, answered = map[int]int{}, map[int]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var x struct {
			API          string `json:"api"`
			Version      int    `json:"api_version"`
			ClientID     string `json:"client_id"`
			ResponseSeen bool   `json:"response_seen"`
		}
		if json.Unmarshal(sc.Bytes(), &x) != nil || x.API != "ListOffsets" || x.ClientID != "burrow" {
			continue
		}
		asked[x.Version]++
		if x.ResponseSeen {
			answered[x.Version]++
		}
	}
	return asked, answered
}
