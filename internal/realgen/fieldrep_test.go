package realgen

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/internal/realkafka"
)

// checkAcks compares kwire's producer_acks_weak hazards with the Java
// producers' acks (one info hazard per client and topic with acks 0 or
// 1, none for acks=all), and its acked_records_lost hazards with the
// records the producers had acknowledged that the partition's log no
// longer holds (truth.AckedLost: the producer's per-record offsets
// against the log read after the scenario).
func checkAcks(t *testing.T, truth Truth, s *correlate.Snapshot) {
	t.Helper()
	want := map[string]bool{}
	for _, raw := range truth.Reports {
		var r struct {
			Kind, Acks, Topic string
			ClientID          string `json:"client_id"`
		}
		if json.Unmarshal(raw, &r) == nil && r.Kind == "produced" && (r.Acks == "0" || r.Acks == "1") {
			want[fmt.Sprintf("%s %s acks=%s", r.ClientID, r.Topic, r.Acks)] = true
		}
	}
	got := map[string]bool{}
	wantLost := map[string]string{}
	for _, l := range truth.AckedLost {
		var runs []string
		for _, o := range l.Offsets {
			runs = append(runs, fmt.Sprintf("%d..%d", o[0], o[1]))
		}
		wantLost[fmt.Sprintf("%s %s/%d acks=%s", l.ClientID, l.Topic, l.Partition, l.Acks)] = fmt.Sprintf("%d records %v", l.N, runs)
	}
	gotLost := map[string]string{}
	for _, h := range s.Hazards {
		switch h.Kind {
		case correlate.HazardProducerAcksWeak:
			got[fmt.Sprintf("%s %s acks=%d", h.ClientID, h.Topic, *h.Acks)] = true
		case correlate.HazardAckedRecordsLost:
			k := fmt.Sprintf("%s %s/%d acks=%d", h.ClientID, h.Topic, *h.Partition, *h.Acks)
			if _, dup := gotLost[k]; dup {
				t.Errorf("acked_records_lost twice for %s: %s", k, h.Summary)
			}
			// The lost offsets of one producer run on: its own records
			// at consecutive offsets (a producer alone on the partition).
			gotLost[k] = fmt.Sprintf("%d records [%d..%d]", *h.Skipped, *h.FromOffset, *h.ToOffset)
		}
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("producer_acks_weak, the Java producers' acks vs kwire (-want +got):\n%s", d)
	}
	if d := realkafka.DiffMaps(wantLost, gotLost); d != "" {
		t.Errorf("acknowledged records lost, the producers' acknowledgements against the log vs kwire (-want +got):\n%s", d)
	}
	if len(want)+len(wantLost) > 0 {
		t.Logf("acks: %d weak producers; acknowledged records lost %v", len(want), gotLost)
	}
}

// checkResets compares kwire's offset_reset hazards with the resets the
// consumers made (truth.Resets: the group's committed offset and the
// log's bounds from the Admin client before the consumer started, the
// first offset it was given): each one told, with its partition, its
// reset, the offsets it went from and to and the records skipped, and
// no other.
func checkResets(t *testing.T, truth Truth, s *correlate.Snapshot) {
	t.Helper()
	if truth.Resets == nil {
		return
	}
	type view struct {
		Reset    string
		From, To int64
		Skipped  int64
		Severity string
	}
	want := map[string][]view{}
	for _, r := range truth.Resets {
		sev := correlate.SeverityInfo
		if r.From >= 0 && r.Skipped > 0 {
			sev = correlate.SeverityCritical // records never processed
		}
		k := fmt.Sprintf("%s %s/%d %s", r.Group, r.Topic, r.Partition, r.ClientID)
		want[k] = append(want[k], view{r.Reset, r.From, r.To, r.Skipped, sev})
	}
	got := map[string][]view{}
	for _, h := range s.Hazards {
		if h.Kind != correlate.HazardOffsetReset {
			continue
		}
		v := view{Reset: h.Reset, From: -1, Severity: h.Severity}
		if h.FromOffset != nil {
			v.From = *h.FromOffset
		}
		if h.ToOffset != nil {
			v.To = *h.ToOffset
		}
		if h.Skipped != nil {
			v.Skipped = *h.Skipped
		}
		k := fmt.Sprintf("%s %s/%d %s", h.Group, h.Topic, *h.Partition, h.ClientID)
		got[k] = append(got[k], v)
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("offset resets, the broker's offsets and the consumers' first records vs kwire (-want +got):\n%s", d)
	}
	t.Logf("resets: %v", got)
}

// checkChurn compares kwire's client_id_churn hazard with the clients
// the application made (truth.Churn): one hazard, counting every one of
// them, its examples among them.
func checkChurn(t *testing.T, truth Truth, s *correlate.Snapshot) {
	t.Helper()
	if truth.Churn == nil {
		return
	}
	var hs []correlate.HazardEvent
	for _, h := range s.Hazards {
		if h.Kind == correlate.HazardClientIDChurn {
			hs = append(hs, h)
		}
	}
	if len(hs) != 1 {
		t.Fatalf("%d client_id_churn hazards, want 1", len(hs))
	}
	h := hs[0]
	if want := int64(len(truth.Churn.ClientIDs)); h.Count != want {
		t.Errorf("client_id_churn counts %d new client ids; the application made %d clients: %s", h.Count, want, h.Summary)
	}
	for _, id := range h.ClientIDs {
		if !slices.Contains(truth.Churn.ClientIDs, id) {
			t.Errorf("client_id_churn names %s, no client of the application's", id)
		}
	}
	span := (truth.Churn.Last - truth.Churn.First) / 1e6
	t.Logf("client_id_churn: %d ids (application: %d) over %d ms (application's reports: %s ms), pattern %s %v",
		h.Count, len(truth.Churn.ClientIDs), h.WindowMillis, strconv.FormatInt(span, 10), h.ClientID, h.ClientIDs)
}
