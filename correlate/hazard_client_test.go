package correlate

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHazardProducerAcksWeak(t *testing.T) {
	h := newHarness(t, nil)
	produce := func(at time.Duration, cid, topic string, acks int16) {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, acks, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batchOf(0, 5, false)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		var resp kmsg.Response
		if acks != 0 {
			resp = kmsg.NewPtrProduceResponse()
		}
		h.ex(at, h.conn("10.0.0.3:4000", "10.0.0.8:9092"), cid, req, resp)
	}
	for i := 0; i < 3; i++ {
		at := time.Duration(i) * time.Second
		produce(at, "fire", "t", 0)
		produce(at, "leader", "t", 1)
		produce(at, "leader", "u", 1)
		produce(at, "safe", "t", -1)
	}
	type view struct {
		Client, Topic string
		Acks          int16
	}
	var got []view
	for _, ev := range h.hazards() {
		if ev.Severity != SeverityInfo || ev.Kind != HazardProducerAcksWeak {
			t.Errorf("hazard %s %s, want producer_acks_weak info", ev.Kind, ev.Severity)
		}
		got = append(got, view{ev.ClientID, ev.Topic, *ev.Acks})
	}
	want := []view{{"fire", "t", 0}, {"leader", "t", 1}, {"leader", "u", 1}}
	if d := diff(want, got); d != "" {
		t.Errorf("producer_acks_weak (-want +got):\n%s", d)
	}
}

// TestHazardClientIDChurn: a host churning (ChurnClientIDs new ids within
// ChurnWindow) is told once per episode, with every new id of the episode
// (the driver's count, not the threshold's): at the episode's end (a
// window without a new id, or the end of the input), or a window after it
// began to churn while ids keep coming.
func TestHazardClientIDChurn(t *testing.T) {
	h := newHarness(t, nil)
	meta := func(at time.Duration, host, cid string) {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		h.ex(at, h.conn(host+":4000", "10.0.0.8:9092"), cid, req, nil)
	}
	meta(0, "10.0.0.5", "stable")
	for i := 1; i <= 25; i++ {
		at := 70*time.Second + time.Duration(i)*time.Second
		meta(at, "10.0.0.5", fmt.Sprintf("consumer-app-%d", i))
		meta(at, "10.0.0.5", "stable") // the same id again and again
	}
	for i := 1; i <= 10; i++ {
		meta(time.Duration(i)*time.Second, "10.0.0.6", fmt.Sprintf("svc-%d", i))
	}
	// One Kafka Streams instance with 12 threads: 26 clients named after
	// its one client.id, no churn.
	meta(0, "10.0.0.9", "orders-admin")
	meta(0, "10.0.0.9", "orders-StateUpdater-1-restore-consumer")
	for i := 1; i <= 12; i++ {
		meta(time.Second, "10.0.0.9", fmt.Sprintf("orders-StreamThread-%d-consumer", i))
		meta(time.Second, "10.0.0.9", fmt.Sprintf("orders-StreamThread-%d-producer", i))
	}
	// Two quiet minutes, then churn again: a second episode, to the end.
	for i := 1; i <= 22; i++ {
		meta(3*time.Minute+time.Duration(i)*time.Second, "10.0.0.5", fmt.Sprintf("consumer-app-%d", 100+i))
	}
	// Churn that does not stop: told a window after the 20th id, with
	// the ids so far; the rest of the episode is not told again.
	for i := 1; i <= 100; i++ {
		meta(5*time.Minute+time.Duration(i)*time.Second, "10.0.0.7", fmt.Sprintf("producer-%d", i))
	}
	h.close(7 * time.Minute)
	type view struct {
		Host, Pattern string
		Count         int64
		Window        int64
	}
	var got []view
	for _, ev := range h.hazards() {
		got = append(got, view{ev.ClientHost, ev.ClientID, ev.Count, ev.WindowMillis})
	}
	want := []view{{"10.0.0.5", "consumer-app-*", 25, 24000}, {"10.0.0.5", "consumer-app-*", 22, 21000},
		{"10.0.0.7", "producer-*", 80, 79000}}
	if d := diff(want, got); d != "" {
		t.Errorf("client_id_churn (-want +got):\n%s", d)
	}
}

// TestHazardLimits: beyond MaxHazards, hazards are still emitted and
// counted, not listed.
func TestHazardLimits(t *testing.T) {
	h := newHarness(t, &Options{Hazards: HazardOptions{MaxHazards: 1}})
	for i, topic := range []string{"t", "u", "v"} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = 9, 0
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		req.Topics = append(req.Topics, rt)
		h.ex(time.Duration(i)*time.Second, h.conn("10.0.0.3:4000", "10.0.0.8:9092"), "fire", req, nil)
	}
	s := h.c.Snapshot()
	got := []any{len(h.hazards()), len(s.Hazards), s.HazardsDropped, s.HazardCounts[SeverityInfo]}
	if d := diff([]any{3, 1, 3 - 1, 3}, got); d != "" {
		t.Errorf("emitted, listed, dropped, counted (-want +got):\n%s", d)
	}
}
