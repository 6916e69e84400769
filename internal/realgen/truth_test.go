package realgen

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Lines as Kafka 4.4.0's ConsoleConsumer printed them with
// OffsetsMessageFormatter: one object a record, no newline between them.
const (
	commitP2  = `{"key":{"type":1,"data":{"group":"rk-joins","topic":"rk-joins","partition":2}},"value":{"version":4,"data":{"offset":10,"leaderEpoch":0,"metadata":"","commitTimestamp":1796622628416,"topicId":"NpSrLyOJQ2mZagAzbByaBw"}}}`
	commitP1  = `{"key":{"type":1,"data":{"group":"rk-joins","topic":"rk-joins","partition":1}},"value":{"version":4,"data":{"offset":12,"leaderEpoch":-1,"metadata":"","commitTimestamp":1796622628416,"topicId":"NpSrLyOJQ2mZagAzbByaBw"}}}`
	tombstone = `{"key":{"type":1,"data":{"group":"rk-joins","topic":"rk-joins","partition":0}},"value":null}`
	timeout   = "2026-12-07T05:51:49.801580660Z main ERROR Error processing message, terminating consumer process: \norg.apache.kafka.common.errors.TimeoutException\n\n"
)

func TestParseFormatted(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []string // "type/value?" per record
		err       string
	}{
		{name: "concatenated, ended by --timeout-ms", out: "Option --consumer-property is deprecated\n" + commitP2 + commitP1 + timeout,
			want: []string{"1/value", "1/value"}},
		{name: "tombstone", out: commitP2 + tombstone + "\nProcessed a total of 2 messages\n", want: []string{"1/value", "1/null"}},
		{name: "other error", out: commitP2 + "main ERROR Error processing message, terminating consumer process: \njava.lang.IllegalStateException: boom\n" + commitP1,
			err: "IllegalStateException"},
		{name: "error at the end", out: commitP2 + "\nmain ERROR Unknown record type 99\n", err: "Unknown record type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := parseFormatted([]byte(tc.out))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one about %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fs {
				v := "value"
				if f.Value == nil {
					v = "null"
				}
				got = append(got, fmt.Sprintf("%d/%s", f.Key.Type, v))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("records %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGenerationOf reads a GroupMetadataValue as GroupMetadataMessageFormatter
// prints it: the assignment is base64 of a ConsumerMemberAssignment.
func TestGenerationOf(t *testing.T) {
	a := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "rk-joins", []int32{2, 0}
	a.Topics = append(a.Topics, at)
	b64 := base64.StdEncoding.EncodeToString(a.AppendTo(nil))
	data := `{"protocolType":"consumer","generation":3,"protocol":"range","leader":"rk-c1-x","currentStateTimestamp":17,` +
		`"members":[{"memberId":"rk-c2-y","groupInstanceId":null,"clientId":"rk-c2","clientHost":"/127.0.0.1","rebalanceTimeout":300000,` +
		`"sessionTimeout":10000,"subscription":"AAE=","assignment":"` + b64 + `"},` +
		`{"memberId":"rk-c1-x","groupInstanceId":"s1","clientId":"rk-c1","clientHost":"/127.0.0.1","rebalanceTimeout":300000,` +
		`"sessionTimeout":10000,"subscription":"","assignment":""}]}`
	g, err := generationOf([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	s1 := "s1"
	want := []MemberTruth{
		{MemberID: "rk-c1-x", ClientID: "rk-c1", InstanceID: &s1, SessionTimeoutMs: 10000},
		{MemberID: "rk-c2-y", ClientID: "rk-c2", SessionTimeoutMs: 10000, Assignment: map[string][]int32{"rk-joins": {0, 2}}},
	}
	if g.Generation != 3 || g.Protocol != "range" || g.Leader != "rk-c1-x" || !reflect.DeepEqual(g.Members, want) {
		t.Errorf("got generation %d protocol %q leader %q members %+v; want 3 range rk-c1-x %+v", g.Generation, g.Protocol, g.Leader, g.Members, want)
	}
}

// TestConversions reads a group's conversions from its records in log
// order, as GroupRecords.java printed them from Kafka 4.4.0 (shortened):
// a classic group upgraded at generation 2 by a KIP-848 member's join,
// and downgraded at epoch 3 when it left; another group's records and
// tombstones between them are no switch.
func TestConversions(t *testing.T) {
	rec := func(typ int, key, value string) string {
		return fmt.Sprintf(`{"key":{"type":%d,"data":%s},"value":%s}`, typ, key, value)
	}
	classic := func(gen int) string {
		return rec(2, `{"group":"g"}`, fmt.Sprintf(`{"version":3,"data":{"protocolType":"consumer","generation":%d,"members":[]}}`, gen))
	}
	epoch := func(e int) string {
		return rec(3, `{"groupId":"g"}`, fmt.Sprintf(`{"version":0,"data":{"epoch":%d}}`, e))
	}
	member := rec(5, `{"groupId":"g","memberId":"m"}`, `{"version":0,"data":{"clientId":"c"}}`)
	other := rec(3, `{"groupId":"h"}`, `{"version":0,"data":{"epoch":9}}`)
	out := classic(1) + classic(2) + rec(2, `{"group":"g"}`, "null") + member + other + epoch(2) + epoch(3) +
		rec(5, `{"groupId":"g","memberId":"m"}`, "null") + rec(3, `{"groupId":"g"}`, "null") + classic(3) + classic(4)
	fs, err := parseFormatted([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []Conversion{{To: "consumer", Epoch: 2}, {To: "classic", Epoch: 3}}
	if got := conversions("g", fs); !reflect.DeepEqual(got, want) {
		t.Errorf("conversions %+v, want %+v", got, want)
	}
	if got := conversions("h", fs); len(got) != 0 {
		t.Errorf("group h: conversions %+v, want none", got)
	}
}
