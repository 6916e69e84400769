package realgen

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_streams",
		Doc: "two Kafka Streams applications counting records by key (a state store with a changelog, one standby " +
			"replica) from rk-st-in (3 partitions): rk-st-classic on the classic protocol (the \"stream\" assignor " +
			"over JoinGroup/SyncGroup, Streams' own userdata) with instances rk-stc1 and rk-stc2, and rk-st-kip on the " +
			"streams protocol (KIP-1071: StreamsGroupHeartbeat, the broker assigns active and standby tasks) with " +
			"instances rk-sts1 and rk-sts2; rk-sts1 closes (leaving the group, epoch -1) midway and its tasks move " +
			"to rk-sts2; at the end every instance closes leaving its group",
		Topics: map[string]int{streamsIn: 3, streamsOutClassic: 1, streamsOutKIP: 1},
		Config: streamsConfig,
		Groups: []string{streamsClassic, streamsKIP},
		Run:    runStreams,
	})
}

const (
	streamsIn         = "rk-st-in"
	streamsOutClassic = "rk-st-out-c"
	streamsOutKIP     = "rk-st-out-s"
	streamsClassic    = "rk-st-classic"
	streamsKIP        = "rk-st-kip"
)

// streamsConfig gives streams groups (KIP-1071) one standby replica of
// each stateful task, as the classic application asks for itself
// (num.standby.replicas): on the streams protocol the broker assigns
// standby tasks, from its group.streams.num.standby.replicas (default 0).
var streamsConfig = func() map[string]string {
	c := maps.Clone(quietReplicas)
	c["group.streams.num.standby.replicas"] = "1"
	return c
}()

func streamsApp(app, client, protocol, output string) map[string]any {
	return map[string]any{
		"group": app, "client_id": client, "input": streamsIn, "output": output,
		"group_protocol": protocol, "count": true, "standby_replicas": 1, "leave_on_close": true,
		// An idle fetch waits 5 s, not 500 ms, for records: a smaller
		// capture; records still come as soon as they are produced.
		"fetch_max_wait_ms": 5000,
	}
}

// streamsTasks reads a streams_tasks report: task id -> partitions, the
// active tasks and the standby ones of all its threads.
func streamsTasks(r Report) (active, standby map[string]map[string][]int32) {
	var st struct {
		Threads []struct {
			Active  map[string]map[string][]int32 `json:"active"`
			Standby map[string]map[string][]int32 `json:"standby"`
		} `json:"threads"`
	}
	active, standby = map[string]map[string][]int32{}, map[string]map[string][]int32{}
	if json.Unmarshal(r.Raw, &st) != nil {
		return
	}
	for _, th := range st.Threads {
		maps.Copy(active, th.Active)
		maps.Copy(standby, th.Standby)
	}
	return
}

// activeTasks: the clients' last streams_tasks reports hold n active
// tasks together, each client at least one when spread.
func activeTasks(n int, spread bool, clients ...string) func([]Report) bool {
	return func(rs []Report) bool {
		total := 0
		for _, c := range clients {
			var last *Report
			for i := range rs {
				if rs[i].Kind == "streams_tasks" && rs[i].ClientID == c {
					last = &rs[i]
				}
			}
			if last == nil {
				return false
			}
			a, _ := streamsTasks(*last)
			if spread && len(a) == 0 {
				return false
			}
			total += len(a)
		}
		return total == n
	}
}

// processedAll: the clients together processed at least n records (each
// client's last streams_processed report).
func processedAll(n int64, clients ...string) func([]Report) bool {
	return func(rs []Report) bool {
		var sum int64
		for _, c := range clients {
			var last int64
			for _, r := range rs {
				if r.Kind == "streams_processed" && r.ClientID == c {
					last = r.Records
				}
			}
			sum += last
		}
		return sum >= n
	}
}

func runStreams(ctx context.Context, e *Env) error {
	if err := e.Produce(ctx, "rk-producer-1", streamsIn, 30); err != nil {
		return err
	}
	classic := []string{"rk-stc1", "rk-stc2"}
	for _, c := range classic {
		if _, err := e.StartReady(ctx, gen.JavaStreams, streamsApp(streamsClassic, c, "classic", streamsOutClassic)); err != nil {
			return err
		}
	}
	if err := e.WaitFor(ctx, "rk-st-classic's 3 active tasks spread over its two instances", activeTasks(3, true, classic...)); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-st-classic processed 30 records", processedAll(30, classic...)); err != nil {
		return err
	}
	kip := []string{"rk-sts1", "rk-sts2"}
	var sts1 *gen.Child
	for i, c := range kip {
		ch, err := e.StartReady(ctx, gen.JavaStreams, streamsApp(streamsKIP, c, "streams", streamsOutKIP))
		if err != nil {
			return err
		}
		if i == 0 {
			sts1 = ch
		}
	}
	if err := e.WaitFor(ctx, "rk-st-kip's 3 active tasks spread over its two instances", activeTasks(3, true, kip...)); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-2", streamsIn, 30); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "both applications processed 60 records", func(rs []Report) bool {
		return processedAll(60, classic...)(rs) && processedAll(60, kip...)(rs)
	}); err != nil {
		return err
	}
	if err := e.describeStreams(ctx); err != nil {
		return err
	}
	if err := sts1.Terminate(ctx); err != nil {
		return fmt.Errorf("close rk-sts1: %w", err)
	}
	if err := e.WaitFor(ctx, "rk-sts2 holds rk-st-kip's 3 active tasks", activeTasks(3, false, "rk-sts2")); err != nil {
		return err
	}
	if err := e.describeStreams(ctx); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-3", streamsIn, 30); err != nil {
		return err
	}
	// rk-sts1's last report stays in the sum: 60 before it left.
	return e.WaitFor(ctx, "both applications processed 90 records", func(rs []Report) bool {
		return processedAll(90, classic...)(rs) && processedAll(90, kip...)(rs)
	})
}

// describeStreams asks the Admin client to describe both applications'
// groups: the streams group (KIP-1071) and the classic one.
func (e *Env) describeStreams(ctx context.Context) error {
	return e.RunJava(ctx, gen.JavaAdmin, map[string]any{"client_id": "rk-admin", "stop_on_error": true,
		"ops": []map[string]any{
			{"op": "describe_streams_groups", "groups": []string{streamsKIP}},
			{"op": "describe_groups", "groups": []string{streamsClassic}},
		}})
}
