package realgen

import (
	"encoding/json"
	"os"
	"regexp"
)

// Conversion is a group converted between the classic and the consumer
// group type (KIP-848's online migration) as the coordinator wrote it in
// __consumer_offsets: the old type's records tombstoned and the new
// type's written in one batch, the consumer group's epoch the classic
// group's generation carried over, or the other way.
type Conversion struct {
	// To is the new type: "consumer" (an upgrade: a ConsumerGroupHeartbeat
	// joined a classic group) or "classic" (a downgrade: the last member
	// on the consumer protocol left).
	To string `json:"to"`
	// Epoch is the generation (to consumer: the new group epoch; to
	// classic: the new group's generation) the records carry over.
	Epoch int32 `json:"epoch"`
	// Logged is the coordinator's log line for it ("[GroupId G] Converted
	// the classic group to a consumer group."), with its time.
	Logged string `json:"logged,omitempty"`
}

// Group coordinator record type of a classic group (GroupMetadata).
const recGroupMetadata = 2

// conversions reads group's conversions from its records in log order
// (fs: every group record type, GroupRecords.java): a value record of one
// type after those of the other. The epoch is that of the first record
// with one after the switch (a ConsumerGroupMetadata epoch, a
// GroupMetadata generation).
func conversions(group string, fs []formatted) []Conversion {
	var out []Conversion
	typ, pending := "", false
	for _, f := range fs {
		var k struct {
			Group   string `json:"group"`
			GroupID string `json:"groupId"`
		}
		if f.Value == nil || json.Unmarshal(f.Key.Data, &k) != nil || (k.Group != group && k.GroupID != group) {
			continue
		}
		var v struct {
			Epoch      *int32 `json:"epoch"`
			Generation *int32 `json:"generation"`
		}
		_ = json.Unmarshal(f.Value.Data, &v)
		t := ""
		switch {
		case f.Key.Type == recGroupMetadata:
			t = "classic"
		case f.Key.Type >= recConsumerGroupMetadata && f.Key.Type <= recConsumerGroupCurrentAssignment:
			t = "consumer"
		default:
			continue
		}
		if typ != "" && t != typ {
			out = append(out, Conversion{To: t, Epoch: -1})
			pending = true
		}
		typ = t
		if !pending {
			continue
		}
		switch {
		case f.Key.Type == recGroupMetadata && v.Generation != nil:
			out[len(out)-1].Epoch, pending = *v.Generation, false
		case f.Key.Type == recConsumerGroupMetadata && v.Epoch != nil:
			out[len(out)-1].Epoch, pending = *v.Epoch, false
		}
	}
	return out
}

var convertedRE = regexp.MustCompile(`(?m)^\[([^\]]+)\] INFO .*\[GroupId (\S+)\] Converted the (?:empty )?(classic|consumer) group to an? (classic|consumer) group\.`)

// loggedConversions adds the coordinators' log lines for group's
// conversions to cs, in turn (every node's server.log; one coordinator at
// a time).
func (e *Env) loggedConversions(group string, cs []Conversion) error {
	var lines [][]string
	for _, id := range e.C.Nodes() {
		b, err := os.ReadFile(e.C.LogFile(id))
		if err != nil {
			return err
		}
		for _, m := range convertedRE.FindAllStringSubmatch(string(b), -1) {
			if m[2] == group {
				lines = append(lines, m)
			}
		}
	}
	for i := range cs {
		for j, m := range lines {
			if m[4] == cs[i].To {
				cs[i].Logged = m[0]
				lines = append(lines[:j], lines[j+1:]...)
				break
			}
		}
	}
	return nil
}
