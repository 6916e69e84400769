package tui

import (
	"fmt"
	"testing"
	"time"

	"github.com/kwire/kwire/correlate"
)

// TestFeedPublishNeverBlocks publishes many frames that no UI takes: the
// pipeline side goes on, the UI gets the latest, the rest are dropped and
// counted.
func TestFeedPublishNeverBlocks(t *testing.T) {
	f := NewFeed(nil)
	now := time.Unix(0, 0)
	for i := range 1000 {
		f.Publish(now.Add(time.Duration(i)*time.Second), nil)
	}
	fr := f.Take()
	if fr == nil || fr.Seq != 1000 {
		t.Fatalf("Take = %+v, want frame 1000", fr)
	}
	if got := f.Dropped(); got != 999 {
		t.Errorf("Dropped = %d, want 999", got)
	}
	if fr := f.Take(); fr != nil {
		t.Errorf("second Take = frame %d, want nil", fr.Seq)
	}
	select {
	case <-f.Ready():
	default:
		t.Error("Ready not signalled")
	}
}

func TestFeedPollEvery(t *testing.T) {
	f := NewFeed(&FeedOptions{Every: time.Second})
	t0 := time.Unix(100, 0)
	tests := []struct {
		name string
		at   time.Duration
		want bool
	}{
		{"first poll publishes", 0, true},
		{"too soon", 999 * time.Millisecond, false},
		{"due", time.Second, true},
		{"too soon again", 1500 * time.Millisecond, false},
		{"due again", 2 * time.Second, true},
	}
	for _, tc := range tests {
		if got := f.Poll(t0.Add(tc.at), nil); got != tc.want {
			t.Errorf("%s: Poll at +%s = %v, want %v", tc.name, tc.at, got, tc.want)
		}
	}
}

// TestFeedHazardsNewestFirst: the hazard feed keeps the latest
// MaxHazards, newest first, and frames share no slice with the feed.
func TestFeedHazardsNewestFirst(t *testing.T) {
	f := NewFeed(&FeedOptions{MaxHazards: 3})
	for i := range 5 {
		f.Event(&correlate.HazardEvent{Kind: fmt.Sprint(i)})
		f.Event(&correlate.MemberEvent{})
	}
	f.Publish(time.Now(), nil)
	fr := f.Take()
	var got []string
	for _, h := range fr.Hazards {
		got = append(got, h.Kind)
	}
	if fmt.Sprint(got) != "[4 3 2]" {
		t.Errorf("hazards = %v, want [4 3 2]", got)
	}
	if fr.Events != 10 {
		t.Errorf("Events = %d, want 10", fr.Events)
	}
	f.Event(&correlate.HazardEvent{Kind: "5"})
	if fr.Hazards[0].Kind != "4" {
		t.Error("a published frame changed after a later event")
	}
}

// TestFrameOfRealCapture runs the real pipeline and checks the frame the
// UI gets: the Snapshot, the stats and the traffic counters agree.
func TestFrameOfRealCapture(t *testing.T) {
	fr := frameOf(t, "g_churn.pcapng", time.Time{})
	if n := len(fr.Snapshot.Groups); n != 1 || fr.Snapshot.Groups[0].Group != "gc-group" {
		t.Fatalf("groups = %d, want gc-group only", n)
	}
	var reqs int64
	for _, a := range fr.Traffic.APIs {
		reqs += a.Requests
	}
	if reqs != fr.Decode.Exchanges {
		t.Errorf("traffic counts %d exchanges, the decoder %d", reqs, fr.Decode.Exchanges)
	}
	var clientReqs, brokerReqs int64
	for _, c := range fr.Traffic.Clients {
		clientReqs += c.Requests
	}
	for _, b := range fr.Traffic.Brokers {
		brokerReqs += b.Requests
	}
	if clientReqs != reqs || brokerReqs != reqs {
		t.Errorf("clients count %d requests, brokers %d, APIs %d", clientReqs, brokerReqs, reqs)
	}
	var conns int64
	for _, b := range fr.Traffic.Brokers {
		conns += b.Conns
	}
	if conns != fr.Decode.KafkaConns {
		t.Errorf("brokers count %d connections, the decoder %d Kafka connections", conns, fr.Decode.KafkaConns)
	}
	if got := len(fr.Hazards); got != fr.Snapshot.HazardCounts["warn"]+fr.Snapshot.HazardCounts["info"]+fr.Snapshot.HazardCounts["critical"] {
		t.Errorf("feed has %d hazards, the snapshot counts %v", got, fr.Snapshot.HazardCounts)
	}
	if !fr.Done || fr.Capture.Packets != 4017 {
		t.Errorf("Done = %v, packets = %d; want true, 4017", fr.Done, fr.Capture.Packets)
	}
}
