package realgen

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/internal/realkafka"
)

// Truth is one real capture's truth file (<name>.truth.json).
type Truth struct {
	Scenario string `json:"scenario"`
	Doc      string `json:"doc"`
	// Kafka is the brokers' version; Clients the Java clients' (the group
	// members', producers'; the Admin client is always 4.4's).
	Kafka   string `json:"kafka"`
	Clients string `json:"clients,omitempty"`
	// Layout is the listener layout: "shared" (clients and inter-broker
	// traffic on one listener) or "separate".
	Layout  string `json:"layout,omitempty"`
	Capture string `json:"capture"`
	Packets int    `json:"packets"`
	// Ports are the port of every listener in the capture: kwire analyze
	// --port.
	Ports []int `json:"ports"`
	// ClientPorts are the client listener's ports, InterBrokerPorts the
	// inter-broker listener's (the same in the shared layout),
	// ControllerPorts the quorum's when the capture holds them.
	ClientPorts      []int `json:"client_ports,omitempty"`
	InterBrokerPorts []int `json:"inter_broker_ports,omitempty"`
	ControllerPorts  []int `json:"controller_ports,omitempty"`
	// Requests count the capture's requests by listener name and API and
	// version ("Fetch v17"), as the recording relays framed them.
	Requests map[string]map[string]int `json:"requests,omitempty"`
	// ClientIDs are the request headers' client ids by listener name.
	ClientIDs map[string][]string `json:"client_ids,omitempty"`
	// KwireArgs are kwire analyze's flags for the brokers' settings that
	// are not on the wire (e.g. --consumer-session-timeout).
	KwireArgs []string `json:"kwire_args,omitempty"`
	// Listeners names each relayed address: "node 1 PLAINTEXT".
	Listeners map[string]string `json:"listeners"`
	Topics    []TopicTruth      `json:"topics"`
	Groups    []GroupTruth      `json:"groups"`
	// Share are the share groups (KIP-932).
	Share []ShareTruth `json:"share_groups,omitempty"`
	// Transactions are the transactional ids (KIP-98).
	Transactions []TxnTruth `json:"transactions,omitempty"`
	// Logs are partitions' records as the broker holds them at the end
	// (truth_log.go).
	Logs []LogTruth `json:"logs,omitempty"`
	// AckedLost are the records producers had acknowledged that the logs
	// no longer hold (truth_log.go).
	AckedLost []AckedLost `json:"acked_lost,omitempty"`
	// Resets are the offset resets the consumers made (scen_12_reset.go).
	Resets []ResetTruth `json:"resets,omitempty"`
	// Churn are the clients an application made one after another
	// (scen_13_churn.go).
	Churn *ChurnTruth `json:"churn,omitempty"`
	// Reports are the Java clients' report lines, in arrival order.
	Reports []json.RawMessage `json:"reports"`
}

// TopicTruth is a topic the scenario created.
type TopicTruth struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
}

// GroupTruth is one group as the broker recorded it.
type GroupTruth struct {
	Group string `json:"group"`
	// Generations are the GroupMetadata records of __consumer_offsets, in
	// log order (GroupMetadataMessageFormatter): one per generation the
	// coordinator stored, an empty group's too (no members).
	Generations []GenerationTruth `json:"generations"`
	// Commits are the offset commit records (OffsetsMessageFormatter), in
	// log order: every accepted commit of every partition.
	Commits []CommitTruth `json:"commits"`
	// Committed is each partition's last commit ("topic/partition").
	Committed map[string]int64 `json:"committed"`
	// Consumer is a KIP-848 group's records (GroupRecords.java: Kafka's
	// formatter over every group record type); nil for a classic group.
	Consumer *ConsumerGroupTruth `json:"consumer,omitempty"`
	// Streams is a streams group's records (KIP-1071, truth_streams.go);
	// nil for other groups.
	Streams *StreamsGroupTruth `json:"streams,omitempty"`
	// Logged are the generations the coordinators logged ("Stabilized
	// group G generation N ... with M members", "Assignment received from
	// leader L ... for generation N"), by generation.
	Logged map[int32]LoggedGeneration `json:"logged"`
	// Conversions are the group's conversions between the classic and
	// the consumer type (KIP-848 online migration), in log order.
	Conversions []Conversion `json:"conversions,omitempty"`
}

// GenerationTruth is one GroupMetadata record.
type GenerationTruth struct {
	Generation   int32          `json:"generation"`
	ProtocolType string         `json:"protocol_type"`
	Protocol     string         `json:"protocol"`
	Leader       string         `json:"leader"`
	Members      []MemberTruth  `json:"members"`
	StateTime    int64          `json:"current_state_timestamp"`
	Record       map[string]any `json:"record"` // the formatter's value data, whole
}

// MemberTruth is one member of a GroupMetadata record, its assignment
// decoded (kmsg.ConsumerMemberAssignment) from the record's bytes.
type MemberTruth struct {
	MemberID         string             `json:"member_id"`
	ClientID         string             `json:"client_id"`
	InstanceID       *string            `json:"instance_id"`
	SessionTimeoutMs int32              `json:"session_timeout_ms"`
	Assignment       map[string][]int32 `json:"assignment"`
}

// CommitTruth is one offset commit record.
type CommitTruth struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"` // -1: a tombstone (offset deleted)
	LeaderEpoch int32  `json:"leader_epoch"`
	CommitTime  int64  `json:"commit_timestamp"`
}

// ConsumerGroupTruth is a KIP-848 group's records in __consumer_offsets,
// in log order, topic ids resolved to names.
type ConsumerGroupTruth struct {
	// GroupEpochs are the ConsumerGroupMetadata records' epochs.
	GroupEpochs []int32 `json:"group_epochs"`
	// TargetEpochs are the ConsumerGroupTargetAssignmentMetadata records'
	// assignment epochs.
	TargetEpochs []int32 `json:"target_epochs"`
	// Members are the ConsumerGroupMemberMetadata records (a tombstone:
	// the member left, Gone).
	Members []Member848 `json:"members"`
	// Assignments are the ConsumerGroupCurrentMemberAssignment records:
	// each member's epoch and partitions as the coordinator stored them.
	Assignments []Assignment848 `json:"assignments"`
	// Targets are the ConsumerGroupTargetAssignmentMember records.
	Targets []Assignment848 `json:"targets"`
}

// Member848 is one ConsumerGroupMemberMetadata record.
type Member848 struct {
	MemberID string `json:"member_id"`
	ClientID string `json:"client_id,omitempty"`
	// Classic: the member uses the classic protocol (JoinGroup, SyncGroup,
	// Heartbeat) in a consumer group (its record's ClassicMemberMetadata).
	Classic bool `json:"classic,omitempty"`
	Gone    bool `json:"gone,omitempty"`
}

// Assignment848 is one member's current (or target) assignment record.
type Assignment848 struct {
	MemberID      string             `json:"member_id"`
	MemberEpoch   int32              `json:"member_epoch"`
	PreviousEpoch int32              `json:"previous_member_epoch"`
	State         int8               `json:"state"`
	Assigned      map[string][]int32 `json:"assigned"`
	Revoking      map[string][]int32 `json:"pending_revocation,omitempty"`
	Gone          bool               `json:"gone,omitempty"`
}

// LoggedGeneration is a generation as its coordinator logged it.
type LoggedGeneration struct {
	Members int    `json:"members"`
	Leader  string `json:"leader,omitempty"`
}

// readTruth fills t from __consumer_offsets, the brokers' logs and the
// clients' reports.
func (e *Env) readTruth(ctx context.Context, t *Truth, groups, share []string) error {
	for _, r := range e.Reports() {
		t.Reports = append(t.Reports, r.Raw)
	}
	if len(groups) == 0 && len(share) == 0 {
		return nil // nothing to read in __consumer_offsets
	}
	var offs, metas, all []formatted
	errc := make(chan error, 3)
	go func() {
		var err error
		offs, err = e.consumeOffsets(ctx, offsetsFormatter)
		errc <- err
	}()
	go func() {
		var err error
		metas, err = e.consumeOffsets(ctx, metadataFormatter)
		errc <- err
	}()
	go func() {
		var err error
		// A 3.9 cluster has no share groups and no KIP-848 groups unless
		// enabled (group.coordinator.rebalance.protocols): its classic
		// records are all there is.
		if e.kafka != realkafka.Version3 {
			all, err = e.consumeOffsets(ctx, "")
		}
		errc <- err
	}()
	for range 3 {
		if err := <-errc; err != nil {
			return err
		}
	}
	if err := e.readAgain(ctx, &all, "", len(groups)+len(share) > 0); err != nil {
		return err
	}
	if err := e.readAgain(ctx, &offs, offsetsFormatter, hasRecordType(all, 0, 1)); err != nil {
		return err
	}
	if err := e.readAgain(ctx, &metas, metadataFormatter, hasRecordType(all, 2)); err != nil {
		return err
	}
	e.Logf("__consumer_offsets: %d offset records, %d group metadata records", len(offs), len(metas))
	for _, g := range groups {
		gt := GroupTruth{Group: g, Committed: map[string]int64{}, Logged: map[int32]LoggedGeneration{}}
		for _, f := range offs {
			var k struct {
				Group, Topic string
				Partition    int32
			}
			if json.Unmarshal(f.Key.Data, &k) != nil || k.Group != g {
				continue
			}
			c := CommitTruth{Topic: k.Topic, Partition: k.Partition, Offset: -1}
			if f.Value != nil {
				var v struct {
					Offset          int64
					LeaderEpoch     *int32
					CommitTimestamp int64
				}
				if err := json.Unmarshal(f.Value.Data, &v); err != nil {
					return fmt.Errorf("offset commit record %s: %w", f.Value.Data, err)
				}
				c.Offset, c.CommitTime, c.LeaderEpoch = v.Offset, v.CommitTimestamp, -1
				if v.LeaderEpoch != nil {
					c.LeaderEpoch = *v.LeaderEpoch
				}
			}
			gt.Commits = append(gt.Commits, c)
			key := k.Topic + "/" + strconv.Itoa(int(k.Partition))
			if c.Offset < 0 {
				delete(gt.Committed, key)
			} else {
				gt.Committed[key] = c.Offset
			}
		}
		for _, f := range metas {
			var k struct{ Group string }
			if json.Unmarshal(f.Key.Data, &k) != nil || k.Group != g || f.Value == nil {
				continue
			}
			gen, err := generationOf(f.Value.Data)
			if err != nil {
				return err
			}
			gt.Generations = append(gt.Generations, gen)
		}
		var err error
		if cg, err := e.consumerGroup(ctx, g, all); err != nil {
			return err
		} else if cg != nil {
			gt.Consumer = cg
		}
		if gt.Streams, err = streamsGroup(g, all); err != nil {
			return err
		}
		if err := e.loggedGenerations(g, gt.Logged); err != nil {
			return err
		}
		gt.Conversions = conversions(g, all)
		if err := e.loggedConversions(g, gt.Conversions); err != nil {
			return err
		}
		t.Groups = append(t.Groups, gt)
	}
	var err error
	t.Share, err = e.shareGroups(ctx, share, all)
	return err
}

// formatted is one line of a CoordinatorRecordMessageFormatter:
// {"key":{"type":T,"data":{...}},"value":{"version":V,"data":{...}}}, value
// null for a tombstone.
type formatted struct {
	Key struct {
		Type int16           `json:"type"`
		Data json.RawMessage `json:"data"`
	} `json:"key"`
	Value *struct {
		Version int16           `json:"version"`
		Data    json.RawMessage `json:"data"`
	} `json:"value"`
}

// consumeOffsets reads all of __consumer_offsets with Kafka's
// ConsoleConsumer and formatter (a class of kafka-tools), until no record
// came for 10 s. With formatter "", GroupRecords.java's formatter (every
// group record type) is used.
func (e *Env) consumeOffsets(ctx context.Context, formatter string) ([]formatted, error) {
	return e.consumeTopic(ctx, "__consumer_offsets", formatter)
}

// Kafka's formatters of __consumer_offsets: offset commit records (key
// types 0 and 1), group metadata records (type 2).
const (
	offsetsFormatter  = "org.apache.kafka.tools.consumer.OffsetsMessageFormatter"
	metadataFormatter = "org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter"
)

// readAgain reads __consumer_offsets again with formatter into fs while
// fs is empty and need says it must not be, twice at most.
// ConsoleConsumer ends after --timeout-ms without a record, counted from
// its start: on a loaded machine its JVM's start, its own group's join
// (the broker's initial rebalance delay, 3 s) and its first fetch once
// took longer, and it ended having read nothing, with no error.
func (e *Env) readAgain(ctx context.Context, fs *[]formatted, formatter string, need bool) error {
	for try := 0; len(*fs) == 0 && need && try < 2; try++ {
		e.Logf("__consumer_offsets read with formatter %q: nothing; reading it again", formatter)
		var err error
		if *fs, err = e.consumeOffsets(ctx, formatter); err != nil {
			return err
		}
	}
	return nil
}

// hasRecordType says whether fs (every record type) holds a record of
// one of the key types.
func hasRecordType(fs []formatted, types ...int16) bool {
	for _, f := range fs {
		if slices.Contains(types, f.Key.Type) {
			return true
		}
	}
	return false
}

// consumeTopic reads all of an internal topic with Kafka's ConsoleConsumer
// and formatter, as consumeOffsets.
func (e *Env) consumeTopic(ctx context.Context, topic, formatter string) ([]formatted, error) {
	// The cluster's own line's tools and formatters; 3.9's ConsoleConsumer
	// takes --consumer-property (4.x: --command-property).
	cp := filepath.Join(realkafka.LibDir(e.kafka), "*")
	prop := "--command-property"
	if e.kafka == realkafka.Version3 {
		prop = "--consumer-property"
	}
	args := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp,
		"org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", e.C.Addrs()[0],
		"--topic", topic, "--from-beginning", "--timeout-ms", "10000", "--formatter", formatter,
		prop, "client.id=rk-truth", prop, "enable.auto.commit=false",
		"--group", fmt.Sprintf("rk-truth-%d", time.Now().UnixNano())}
	if formatter == "" {
		// GroupRecords.java is built on 4.4's record serde.
		args[4] = filepath.Join(realkafka.LibDir(realkafka.Version4), "*")
		// e.D.Dir is <module>/java/driver.
		src := filepath.Join(filepath.Dir(filepath.Dir(e.D.Dir)), "internal", "realgen", "GroupRecords.java")
		args = append(args[:5:5], src, e.C.Addrs()[0])
		formatter = "GroupRecords"
	}
	cmd := exec.CommandContext(ctx, e.D.Java, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// Kept beside the broker logs, to study a failed reading.
	_ = os.WriteFile(filepath.Join(e.C.Dir(), "truth-"+topic+"-"+filepath.Ext("." + formatter)[1:]+".out"), append(out, stderr.Bytes()...), 0o644)
	if err != nil {
		return nil, fmt.Errorf("ConsoleConsumer %s: %w\n%s", formatter, err, stderr.String())
	}
	fs, err := parseFormatted(out)
	if err != nil {
		return nil, fmt.Errorf("ConsoleConsumer %s: %w", formatter, err)
	}
	return fs, nil
}

// parseFormatted reads a CoordinatorRecordMessageFormatter's output.
func parseFormatted(out []byte) ([]formatted, error) {
	// The formatters write one JSON object a record with no newline
	// between them; the tool's own log lines go to stdout too, among them
	// "ERROR Error processing message, terminating consumer process:
	// org.apache.kafka.common.errors.TimeoutException": how --timeout-ms
	// ends it, normally.
	out = bytes.ReplaceAll(out, []byte("ERROR Error processing message, terminating consumer process: \norg.apache.kafka.common.errors.TimeoutException"), nil)
	var fs []formatted
	rest := out
	for {
		i := bytes.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		if k := bytes.Index(rest[:i], []byte("ERROR")); k >= 0 {
			return nil, fmt.Errorf("%s", firstLine(rest[k:]))
		}
		dec := json.NewDecoder(bytes.NewReader(rest[i:]))
		var f formatted
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("output at %q: %w", firstLine(rest[i:]), err)
		}
		fs = append(fs, f)
		rest = rest[i+int(dec.InputOffset()):]
	}
	if k := bytes.Index(rest, []byte("ERROR")); k >= 0 {
		return nil, fmt.Errorf("%s", firstLine(rest[k:]))
	}
	return fs, nil
}

// firstLine is b's first line, or two when the first ends with ": " (a
// log line whose exception follows), at most 300 bytes.
func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		end := i
		if bytes.HasSuffix(b[:i], []byte(": ")) {
			if j := bytes.IndexByte(b[i+1:], '\n'); j >= 0 {
				end = i + 1 + j
			} else {
				end = len(b)
			}
		}
		b = b[:end]
	}
	if len(b) > 300 {
		b = b[:300]
	}
	return string(b)
}

// generationOf reads a GroupMetadataValue as the formatter printed it.
func generationOf(data json.RawMessage) (GenerationTruth, error) {
	var v struct {
		ProtocolType          string
		Generation            int32
		Protocol              *string
		Leader                *string
		CurrentStateTimestamp int64
		Members               []struct {
			MemberID        string `json:"memberId"`
			GroupInstanceID *string
			ClientID        string `json:"clientId"`
			SessionTimeout  int32
			Assignment      json.RawMessage
		}
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return GenerationTruth{}, fmt.Errorf("group metadata record %s: %w", data, err)
	}
	g := GenerationTruth{Generation: v.Generation, ProtocolType: v.ProtocolType, StateTime: v.CurrentStateTimestamp}
	if v.Protocol != nil {
		g.Protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.Leader = *v.Leader
	}
	_ = json.Unmarshal(data, &g.Record)
	for _, m := range v.Members {
		mt := MemberTruth{MemberID: m.MemberID, ClientID: m.ClientID, InstanceID: m.GroupInstanceID, SessionTimeoutMs: m.SessionTimeout}
		raw, err := bytesField(m.Assignment)
		if err != nil {
			return g, fmt.Errorf("member %s assignment: %w", m.MemberID, err)
		}
		if len(raw) > 0 && v.ProtocolType == "consumer" {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(raw); err != nil {
				return g, fmt.Errorf("member %s assignment: %w", m.MemberID, err)
			}
			mt.Assignment = map[string][]int32{}
			for _, tp := range a.Topics {
				ps := append([]int32(nil), tp.Partitions...)
				sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
				mt.Assignment[tp.Topic] = ps
			}
		}
		g.Members = append(g.Members, mt)
	}
	sort.Slice(g.Members, func(i, j int) bool { return g.Members[i].MemberID < g.Members[j].MemberID })
	return g, nil
}

// bytesField decodes a bytes field of Kafka's generated JSON converters:
// a base64 string.
func bytesField(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("bytes field %s: %w", raw, err)
	}
	return base64.StdEncoding.DecodeString(s)
}

var (
	stabilizedRE = regexp.MustCompile(`Stabilized group (\S+) generation (\d+) .*?with (\d+) members`)
	assignmentRE = regexp.MustCompile(`Assignment received from leader (\S+) for group (\S+) for generation (\d+)`)
)

// loggedGenerations reads group's generations from every node's
// server.log (the classic group coordinator's INFO lines).
func (e *Env) loggedGenerations(group string, out map[int32]LoggedGeneration) error {
	for _, id := range e.C.Nodes() {
		b, err := os.ReadFile(e.C.LogFile(id))
		if err != nil {
			return err
		}
		for _, m := range stabilizedRE.FindAllStringSubmatch(string(b), -1) {
			if m[1] == group {
				gen, _ := strconv.Atoi(m[2])
				l := out[int32(gen)]
				l.Members, _ = strconv.Atoi(m[3])
				out[int32(gen)] = l
			}
		}
		for _, m := range assignmentRE.FindAllStringSubmatch(string(b), -1) {
			if m[2] == group {
				gen, _ := strconv.Atoi(m[3])
				l := out[int32(gen)]
				l.Leader = m[1]
				out[int32(gen)] = l
			}
		}
	}
	return nil
}

// Group coordinator record types (CoordinatorRecordType, Kafka 4.4).
const (
	recConsumerGroupMetadata          = 3
	recConsumerGroupMemberMetadata    = 5
	recConsumerGroupTargetMetadata    = 6
	recConsumerGroupTargetMember      = 7
	recConsumerGroupCurrentAssignment = 8
)

// consumerGroup collects group's KIP-848 records from fs (every group
// record type); nil when there are none (a classic group).
func (e *Env) consumerGroup(ctx context.Context, group string, fs []formatted) (*ConsumerGroupTruth, error) {
	var cg ConsumerGroupTruth
	found := false
	var names map[string]string
	for _, f := range fs {
		var k struct {
			GroupID  string `json:"groupId"`
			MemberID string `json:"memberId"`
		}
		if f.Key.Type < recConsumerGroupMetadata || f.Key.Type > recConsumerGroupCurrentAssignment ||
			json.Unmarshal(f.Key.Data, &k) != nil || k.GroupID != group {
			continue
		}
		found = true
		if names == nil {
			var err error
			if names, err = e.topicNames(ctx); err != nil {
				return nil, err
			}
		}
		var v struct {
			Epoch               int32
			AssignmentEpoch     int32
			ClientID            string          `json:"clientId"`
			ClassicMeta         json.RawMessage `json:"classicMemberMetadata"`
			MemberEpoch         int32
			PreviousMemberEpoch int32
			State               int8
			AssignedPartitions  []topicPartitions
			PendingRevocation   []topicPartitions `json:"partitionsPendingRevocation"`
			TopicPartitions     []topicPartitions
		}
		if f.Value != nil {
			if err := json.Unmarshal(f.Value.Data, &v); err != nil {
				return nil, fmt.Errorf("record type %d %s: %w", f.Key.Type, f.Value.Data, err)
			}
		}
		switch f.Key.Type {
		case recConsumerGroupMetadata:
			if f.Value != nil {
				cg.GroupEpochs = append(cg.GroupEpochs, v.Epoch)
			}
		case recConsumerGroupTargetMetadata:
			if f.Value != nil {
				cg.TargetEpochs = append(cg.TargetEpochs, v.AssignmentEpoch)
			}
		case recConsumerGroupMemberMetadata:
			classic := len(v.ClassicMeta) > 0 && string(v.ClassicMeta) != "null"
			cg.Members = append(cg.Members, Member848{MemberID: k.MemberID, ClientID: v.ClientID, Classic: classic, Gone: f.Value == nil})
		case recConsumerGroupCurrentAssignment:
			cg.Assignments = append(cg.Assignments, Assignment848{MemberID: k.MemberID, MemberEpoch: v.MemberEpoch,
				PreviousEpoch: v.PreviousMemberEpoch, State: v.State, Assigned: named(v.AssignedPartitions, names),
				Revoking: named(v.PendingRevocation, names), Gone: f.Value == nil})
		case recConsumerGroupTargetMember:
			cg.Targets = append(cg.Targets, Assignment848{MemberID: k.MemberID, Assigned: named(v.TopicPartitions, names), Gone: f.Value == nil})
		}
	}
	if !found {
		return nil, nil
	}
	return &cg, nil
}

// topicPartitions is the records' TopicPartitions: a topic id (Kafka's
// Uuid string: base64url of 16 bytes) and partitions.
type topicPartitions struct {
	TopicID    string  `json:"topicId"`
	Partitions []int32 `json:"partitions"`
}

func named(tps []topicPartitions, names map[string]string) map[string][]int32 {
	if len(tps) == 0 {
		return nil
	}
	out := map[string][]int32{}
	for _, tp := range tps {
		n, ok := names[tp.TopicID]
		if !ok {
			n = "id:" + tp.TopicID
		}
		ps := append([]int32(nil), tp.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out[n] = append(out[n], ps...)
	}
	return out
}

// topicNames maps the cluster's topic ids (as Kafka prints a Uuid) to
// names, from a Metadata request of all topics.
func (e *Env) topicNames(ctx context.Context) (map[string]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.C.Addrs()...), kgo.ClientID("rk-truth"))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata for topic ids: %w", err)
	}
	out := map[string]string{}
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out[base64.RawURLEncoding.EncodeToString(t.TopicID[:])] = *t.Topic
		}
	}
	return out, nil
}
