package realgen

import (
	"context"
	"fmt"
	"strconv"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_reset",
		Doc: "field report 2's silent auto.offset.reset: two groups of Java classic consumers read and commit 20 records " +
			"of each partition of rk-reset (both start with no committed offset: auto.offset.reset earliest), and close; 20 " +
			"more are written to each partition, and DeleteRecords moves partition 0's log start to 30, past both groups' " +
			"committed offset 20 (as retention would). New consumers start: their Fetch at 20 is answered " +
			"OFFSET_OUT_OF_RANGE, and auto.offset.reset moves them, rk-reset-early (earliest) to 30: records 20..29 " +
			"skipped, rk-reset-late (latest) to 40: records 20..39 skipped; partition 1 resumes at 20 in both",
		Topics: map[string]int{resetTopic: 2},
		Config: quietReplicas,
		Groups: []string{resetEarly, resetLate},
		Run:    runReset,
		Truth:  resetTruth,
	})
}

const (
	resetTopic = "rk-reset"
	resetEarly = "rk-reset-early"
	resetLate  = "rk-reset-late"
	resetCut   = 30 // partition 0's new log start
)

// ResetTruth is a consumer starting a group partition somewhere else than
// at its committed offset: none was committed, or the committed offset was
// out of the log (below its start or above its end); the client's
// auto.offset.reset chose where it went.
type ResetTruth struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	ClientID  string `json:"client_id"`
	// Reset is the client's auto.offset.reset.
	Reset string `json:"reset"`
	// From is the group's committed offset (the Admin client's
	// listConsumerGroupOffsets before the client started), -1 none.
	From int64 `json:"from"`
	// To is the first offset the client was given (its consumed report).
	To int64 `json:"to"`
	// LogStart and LogEnd are the partition's log start and end as the
	// client started (the Admin client's listOffsets earliest and latest).
	LogStart int64 `json:"log_start_offset"`
	LogEnd   int64 `json:"log_end_offset"`
	// Skipped are the records between From and To the group never
	// processed (To-From, From >= 0); for a start without a committed
	// offset, the records in the log before To.
	Skipped int64 `json:"skipped"`
}

// resetRound is one consumer start of the scenario, for the truth.
type resetRound struct {
	client, group, reset string
}

var resetRounds = []resetRound{
	{"rk-reset-e1", resetEarly, "earliest"}, {"rk-reset-l1", resetLate, "earliest"},
	{"rk-reset-e2", resetEarly, "earliest"}, {"rk-reset-l2", resetLate, "latest"},
}

func resetConsumer(r resetRound) map[string]any {
	return map[string]any{
		"client_id": r.client, "group": r.group, "topics": []string{resetTopic}, "assignor": "range",
		"commit": "sync", "auto_offset_reset": r.reset, "session_timeout_ms": 10000, "heartbeat_ms": 1000,
	}
}

// resetAdmin reads what the broker holds before a round starts: both
// groups' committed offsets and the topic's log bounds.
func (e *Env) resetAdmin(ctx context.Context, extra ...map[string]any) error {
	ops := append(extra,
		map[string]any{"op": "group_offsets", "group": resetEarly},
		map[string]any{"op": "group_offsets", "group": resetLate},
		map[string]any{"op": "list_offsets", "topic": resetTopic})
	return e.RunJava(ctx, gen.JavaAdmin, map[string]any{"client_id": "rk-admin", "stop_on_error": true, "ops": ops})
}

func runReset(ctx context.Context, e *Env) error {
	n := 0
	for p := range int32(2) {
		n++
		if err := e.produceTo(ctx, "rk-producer-"+strconv.Itoa(n), resetTopic, p, 20); err != nil {
			return err
		}
	}
	round := func(rs []resetRound, want int64) error {
		var cs []*gen.Child
		for _, r := range rs {
			c, err := e.StartReady(ctx, gen.JavaConsumer, resetConsumer(r))
			if err != nil {
				return err
			}
			cs = append(cs, c)
		}
		for _, r := range rs {
			if err := e.WaitFor(ctx, fmt.Sprintf("%s committed %d records", r.client, want), committedBy(resetTopic, want, r.client)); err != nil {
				return err
			}
		}
		for _, c := range cs {
			if err := c.Terminate(ctx); err != nil {
				return fmt.Errorf("close: %w", err)
			}
		}
		return nil
	}
	if err := e.resetAdmin(ctx); err != nil {
		return err
	}
	if err := round(resetRounds[:2], 40); err != nil {
		return err
	}
	for p := range int32(2) {
		n++
		if err := e.produceTo(ctx, "rk-producer-"+strconv.Itoa(n), resetTopic, p, 20); err != nil {
			return err
		}
	}
	if err := e.resetAdmin(ctx, map[string]any{"op": "delete_records", "topic": resetTopic, "partition": 0, "before": resetCut}); err != nil {
		return err
	}
	// rk-reset-e2 reads partition 0 from 30 and partition 1 from 20:
	// 10 + 20 records, committed at 40 and 40; rk-reset-l2 only
	// partition 1's 20 until more are written to partition 0.
	var cs []*gen.Child
	for _, r := range resetRounds[2:] {
		c, err := e.StartReady(ctx, gen.JavaConsumer, resetConsumer(r))
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	if err := e.WaitFor(ctx, "rk-reset-e2 committed 40 and 40", committedBy(resetTopic, 80, "rk-reset-e2")); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-reset-l2 committed 40 on partition 1", committedBy(resetTopic, 40, "rk-reset-l2")); err != nil {
		return err
	}
	n++
	if err := e.produceTo(ctx, "rk-producer-"+strconv.Itoa(n), resetTopic, 0, 5); err != nil {
		return err
	}
	for _, c := range []string{"rk-reset-e2", "rk-reset-l2"} {
		if err := e.WaitFor(ctx, c+" committed 45 and 40", committedBy(resetTopic, 85, c)); err != nil {
			return err
		}
	}
	for _, c := range cs {
		if err := c.Terminate(ctx); err != nil {
			return fmt.Errorf("close: %w", err)
		}
	}
	return nil
}

// resetTruth finds each round's resets from the Admin client's answers
// before it (committed offsets, log bounds) and the first offsets the
// round's consumer was given.
func resetTruth(_ context.Context, e *Env, t *Truth) error {
	rs := e.Reports()
	admin := 0 // admin group_offsets/list_offsets reports seen, by round
	type bounds struct{ start, end int64 }
	var committed map[string]map[string]int64 // group -> partition -> offset
	var logs map[string]bounds
	roundAdmin := []map[string]map[string]int64{}
	roundLogs := []map[string]bounds{}
	for _, r := range rs {
		if r.Kind != "admin" {
			continue
		}
		var a struct {
			Op          string `json:"op"`
			TargetGroup string `json:"target_group"`
		}
		if err := jsonInto(r, &a); err != nil {
			return err
		}
		switch a.Op {
		case "group_offsets":
			if committed == nil {
				committed = map[string]map[string]int64{}
			}
			var g struct {
				Result map[string]map[string]int64 `json:"result"`
			}
			if err := jsonInto(r, &g); err != nil {
				return err
			}
			committed[a.TargetGroup] = g.Result[resetTopic]
		case "list_offsets":
			var l struct {
				Result struct {
					Earliest map[string]map[string]int64 `json:"earliest"`
					Latest   map[string]map[string]int64 `json:"latest"`
				} `json:"result"`
			}
			if err := jsonInto(r, &l); err != nil {
				return err
			}
			logs = map[string]bounds{}
			for p, s := range l.Result.Earliest[resetTopic] {
				logs[p] = bounds{s, l.Result.Latest[resetTopic][p]}
			}
			roundAdmin, roundLogs = append(roundAdmin, committed), append(roundLogs, logs)
			committed = nil
			admin++
		}
	}
	if admin != 2 {
		return fmt.Errorf("%d admin rounds, want 2", admin)
	}
	for i, rr := range resetRounds {
		k := i / 2
		for p := range int32(2) {
			ps := strconv.Itoa(int(p))
			from, ok := roundAdmin[k][rr.group][ps]
			if !ok {
				from = -1
			}
			b := roundLogs[k][ps]
			to := int64(-1)
			for _, r := range rs {
				var c struct {
					FirstOffset int64 `json:"first_offset"`
				}
				if r.Kind == "consumed" && r.ClientID == rr.client && r.Topic == resetTopic && r.Partition == p && jsonInto(r, &c) == nil && (to < 0 || c.FirstOffset < to) {
					to = c.FirstOffset
				}
			}
			if to < 0 {
				return fmt.Errorf("%s consumed nothing of %s/%d", rr.client, resetTopic, p)
			}
			if from >= b.start && from <= b.end {
				if to != from {
					return fmt.Errorf("%s started %s/%d at %d, not at its committed %d", rr.client, resetTopic, p, to, from)
				}
				continue // resumed where the group was
			}
			rt := ResetTruth{Group: rr.group, Topic: resetTopic, Partition: p, ClientID: rr.client, Reset: rr.reset,
				From: from, To: to, LogStart: b.start, LogEnd: b.end, Skipped: to - from}
			if from < 0 {
				rt.Skipped = to - b.start
			}
			t.Resets = append(t.Resets, rt)
		}
	}
	e.Logf("resets: %+v", t.Resets)
	return nil
}
