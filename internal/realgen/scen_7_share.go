package realgen

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_share",
		Doc: "a share group rk-share (KIP-932) of Java KafkaShareConsumers (explicit acknowledgement) on one partition, " +
			"with a 5 s acquisition lock and a delivery limit of 3: rk-sh1 acquires the first 10 records and is SIGKILLed " +
			"holding them (the broker releases them when its connection closes, and expires it 10 s later); rk-sh2 gets them " +
			"again (delivery count 2) and accepts them, and releases a poison record of the next 10 every time until the " +
			"broker archives it at its 3rd delivery; rk-sh2 closes; rk-sh3 holds its first 5 records 8 s, past their lock, " +
			"so the broker puts them back and delivers them to it again",
		Topics: map[string]int{shareTopic: 1},
		Config: shareConfig,
		Share:  []string{shareGroup},
		// group.share.session.timeout.ms and
		// group.share.delivery.count.limit are not on the wire.
		Kwire: []string{"--consumer-session-timeout", "10s", "--share-delivery-limit", "3"},
		Run:   runShare,
	})
}

const (
	shareTopic = "rk-share"
	shareGroup = "rk-share"
)

// shareConfig shortens the share group timers (KIP-932, group.share.*):
// a 5 s acquisition lock (the minimum a group may have lowered to 1 s), a
// delivery limit of 3, and a 10 s session so the killed member expires
// while the capture runs.
var shareConfig = func() map[string]string {
	c := maps.Clone(quietReplicas)
	c["group.share.record.lock.duration.ms"] = "5000"
	c["group.share.min.record.lock.duration.ms"] = "1000"
	c["group.share.delivery.count.limit"] = "3"
	c["group.share.min.delivery.count.limit"] = "2"
	c["group.share.session.timeout.ms"] = "10000"
	c["group.share.min.session.timeout.ms"] = "6000"
	return c
}()

// sharePoison is the value of the 4th record of a producer run of size
// 21 (ProducerMode.record: record i is size bytes of 'a'+i), the second
// batch: no record of the other batches (sizes 20 and 22) has it.
var sharePoison = strings.Repeat("d", 21)

func shareMember(client string, more map[string]any) map[string]any {
	a := map[string]any{"client_id": client, "group": shareGroup, "topics": []string{shareTopic}}
	maps.Copy(a, more)
	return a
}

// acked counts the records client reported acknowledged as how.
func acked(rs []Report, client, how string) int {
	n := 0
	for _, r := range rs {
		if r.Kind != "share_acks" || r.ClientID != client {
			continue
		}
		var a struct{ Acks map[string]int }
		if json.Unmarshal(r.Raw, &a) == nil {
			n += a.Acks[how]
		}
	}
	return n
}

func produceSized(ctx context.Context, e *Env, client string, n, size int) error {
	return e.RunJava(ctx, gen.JavaProducer, map[string]any{
		"client_id": client, "topic": shareTopic, "records": n, "size": size, "acks": "all",
	})
}

func runShare(ctx context.Context, e *Env) error {
	if err := e.RunJava(ctx, gen.JavaAdmin, map[string]any{"client_id": "rk-admin", "stop_on_error": true,
		"ops": []map[string]any{{"op": "alter_group_config", "group": shareGroup,
			"configs": map[string]string{"share.auto.offset.reset": "earliest"}}}}); err != nil {
		return err
	}
	if err := produceSized(ctx, e, "rk-producer-1", 10, 20); err != nil {
		return err
	}
	sh1, err := e.StartReady(ctx, gen.JavaShare, shareMember("rk-sh1", map[string]any{"hold_ms": 600000}))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-sh1 holds its records", func(rs []Report) bool { return countKind(rs, "rk-sh1", "share_hold") > 0 }); err != nil {
		return err
	}
	if err := sh1.Kill(); err != nil {
		return err
	}
	e.Logf("rk-sh1 SIGKILLed holding its records")
	sh2, err := e.StartReady(ctx, gen.JavaShare, shareMember("rk-sh2", map[string]any{"poison": sharePoison, "poison_ack": "release"}))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-sh2 accepted rk-sh1's 10 records", func(rs []Report) bool { return acked(rs, "rk-sh2", "accept") >= 10 }); err != nil {
		return err
	}
	if err := produceSized(ctx, e, "rk-producer-2", 10, 21); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-sh2 accepted 19 records and released the poison record 3 times", func(rs []Report) bool {
		return acked(rs, "rk-sh2", "accept") >= 19 && acked(rs, "rk-sh2", "release") >= 3
	}); err != nil {
		return err
	}
	if err := e.describeShare(ctx); err != nil {
		return err
	}
	if err := sh2.Terminate(ctx); err != nil {
		return fmt.Errorf("close rk-sh2: %w", err)
	}
	if err := produceSized(ctx, e, "rk-producer-3", 5, 22); err != nil {
		return err
	}
	sh3, err := e.Start(ctx, gen.JavaShare, shareMember("rk-sh3", map[string]any{"hold_ms": 8000}))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-sh3 accepted its 5 records after its lock ran out", func(rs []Report) bool { return acked(rs, "rk-sh3", "accept") >= 5 }); err != nil {
		return err
	}
	if err := e.describeShare(ctx); err != nil {
		return err
	}
	if err := sh3.Terminate(ctx); err != nil {
		return fmt.Errorf("close rk-sh3: %w", err)
	}
	return nil
}

// describeShare asks the Admin client to describe the share group.
func (e *Env) describeShare(ctx context.Context) error {
	return e.RunJava(ctx, gen.JavaAdmin, map[string]any{"client_id": "rk-admin", "stop_on_error": true,
		"ops": []map[string]any{{"op": "describe_share_groups", "groups": []string{shareGroup}}}})
}
