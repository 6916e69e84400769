package gen

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

var gChurnScenario = Scenario{
	Name: "g_churn",
	Doc: "consumer group gc-group (cooperative-sticky, 6s session timeout) on gc-orders (6 partitions) while a kgo " +
		"producer writes: members 1 (in process), 2 (a child process) and 3 join one at a time; member 4 joins; " +
		"member 3 leaves gracefully (LeaveGroup); with the producer paused and everything committed, member 2 is " +
		"SIGKILLed and expires after its session timeout; the producer writes 300 more records, the two left " +
		"consume them and close",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(6, "gc-orders"), kfake.GroupMinSessionTimeout(time.Second)}},
	Timeout: 60 * time.Second,
	Run:     runChurn,
}

func runChurn(ctx context.Context, c *Cluster) error {
	const topic, group, parts = "gc-orders", "gc-group", 6
	args := func(i int) GMemberArgs {
		return GMemberArgs{ClientID: fmt.Sprintf("gc-member-%d", i), Group: group, Topics: []string{topic}, SessionTimeoutMillis: 6000}
	}
	prod, err := startProducer(ctx, c, "gc-producer", topic, 20, 60, 100*time.Millisecond)
	if err != nil {
		return err
	}
	m1, err := startGMember(ctx, c, args(1))
	if err != nil {
		return err
	}
	if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
		return err
	}
	child, err := startGChild(ctx, c, args(2))
	if err != nil {
		return err
	}
	if _, err := c.waitStable(ctx, group, 2, parts); err != nil {
		return err
	}
	var ms []*gMember
	for _, i := range []int{3, 4} {
		sleepCtx(ctx, time.Second)
		m, err := startGMember(ctx, c, args(i))
		if err != nil {
			return err
		}
		ms = append(ms, m)
		if _, err := c.waitStable(ctx, group, i, parts); err != nil {
			return err
		}
	}
	sleepCtx(ctx, time.Second)
	ms[0].leave() // member 3
	if _, err := c.waitStable(ctx, group, 3, parts); err != nil {
		return err
	}
	// Kill member 2 only when no records are on their way to it, so
	// what it reported having read is what the wire carried to it.
	if err := prod.halt(); err != nil {
		return err
	}
	if err := c.waitCaughtUp(ctx, group, topic); err != nil {
		return err
	}
	sleepCtx(ctx, 500*time.Millisecond)
	id := c.scriptGone(group, "gc-member-2", CauseMemberExpired, 6*time.Second)
	_, gen := c.groups.lastGeneration(group, id)
	if err := child.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	c.AddHazard(Hazard{Kind: "member_expired", Group: group, MemberID: id, ClientID: "gc-member-2", Generation: i32(gen),
		Numbers: map[string]int64{"session_timeout_ms": 6000}, Note: "SIGKILLed with the group caught up; the only hazard meant in g_churn"})
	c.Note("g_churn: child member gc-member-2 (member id %s) was SIGKILLed at %s, with the group caught up; "+
		"its group reports (fetched records, syncs) arrived line by line before it died", id, time.Now().Format(time.RFC3339Nano))
	if _, err := c.waitStable(ctx, group, 2, parts); err != nil {
		return err
	}
	sleepCtx(ctx, 500*time.Millisecond)
	cl, err := c.Kgo(kgo.ClientID("gc-producer"))
	if err != nil {
		return err
	}
	err = produce(ctx, cl, topic, 100000, 300, 60, 20)
	cl.Close()
	if err != nil {
		return err
	}
	if err := c.waitCaughtUp(ctx, group, topic); err != nil {
		return err
	}
	ms[1].leave() // member 4
	if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
		return err
	}
	m1.leave()
	if err := c.RecordGroups(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}
