package realgen

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_coordclose",
		Doc: "field report 1 on the Java client: two classic consumers of group rk-coordclose (range, 3 partitions) are " +
			"given one bootstrap broker, not the group's coordinator (the Admin client's FindCoordinator named it first); " +
			"they ask that broker FindCoordinator on their bootstrap connection, then talk to the coordinator on " +
			"another and fetch from each partition's leader on others; with connections.max.idle.ms 5 s the client " +
			"closes the idle FindCoordinator connections, and the group goes on consuming and committing: every " +
			"Fetch and commit is still the group's",
		Topics: map[string]int{coordCloseTopic: 3},
		Config: quietReplicas,
		Groups: []string{coordCloseGroup},
		Run:    runCoordClose,
	})
}

const (
	coordCloseTopic = "rk-coordclose"
	coordCloseGroup = "rk-coordclose"
)

func coordCloseConsumer(client string) map[string]any {
	return map[string]any{
		"client_id": client, "group": coordCloseGroup, "topics": []string{coordCloseTopic},
		"assignor": "range", "commit": "sync", "session_timeout_ms": 10000, "heartbeat_ms": 1000,
		"connections_max_idle_ms": 5000,
	}
}

// fcCoordinator is the node the broker named as group's coordinator in
// the last FindCoordinator answer the tap relayed, -1 if none.
func fcCoordinator(rec *gen.Recorder, group string) int32 {
	node := int32(-1)
	for _, x := range rec.Exchanges(int16(kmsg.FindCoordinator)) {
		resp, ok := x.Resp.(*kmsg.FindCoordinatorResponse)
		if !ok {
			continue
		}
		for _, c := range resp.Coordinators {
			if c.Key == group && c.ErrorCode == 0 {
				node = c.NodeID
			}
		}
	}
	return node
}

// fcConns returns the connections client sent FindCoordinator on.
func fcConns(rec *gen.Recorder, client string) []*gen.Conn {
	var out []*gen.Conn
	for _, x := range rec.Exchanges(int16(kmsg.FindCoordinator)) {
		if x.ClientID == client && !slices.Contains(out, x.Conn) {
			out = append(out, x.Conn)
		}
	}
	return out
}

// groupAPIs are the requests of a consumer's group traffic.
var groupAPIs = []int16{int16(kmsg.JoinGroup), int16(kmsg.SyncGroup), int16(kmsg.Heartbeat), int16(kmsg.OffsetCommit),
	int16(kmsg.OffsetFetch), int16(kmsg.LeaveGroup), int16(kmsg.Fetch)}

// carriedGroup returns the group requests conn carried.
func carriedGroup(rec *gen.Recorder, conn *gen.Conn) []string {
	var out []string
	for _, x := range rec.Exchanges(groupAPIs...) {
		if x.Conn == conn && !slices.Contains(out, kmsg.NameForKey(x.Req.Key())) {
			out = append(out, kmsg.NameForKey(x.Req.Key()))
		}
	}
	return out
}

func runCoordClose(ctx context.Context, e *Env) error {
	rec := e.C.Recorder()
	// The group does not exist yet: DescribeGroups fails
	// (GROUP_ID_NOT_FOUND), but the Admin client's FindCoordinator, before
	// it, names the coordinator.
	if err := e.RunJava(ctx, gen.JavaAdmin, map[string]any{"client_id": "rk-admin",
		"ops": []map[string]any{{"op": "describe_groups", "groups": []string{coordCloseGroup}}}}); err != nil {
		return err
	}
	coord := fcCoordinator(rec, coordCloseGroup)
	if coord < 0 {
		return fmt.Errorf("no FindCoordinator answer named %s's coordinator", coordCloseGroup)
	}
	boot := int32(-1)
	for _, n := range e.C.Nodes() {
		if n != coord {
			boot = n
			break
		}
	}
	addr := e.C.Addrs()[boot-1]
	e.Logf("group %s is coordinated by node %d; the consumers bootstrap with node %d (%s) only", coordCloseGroup, coord, boot, addr)
	clients := []string{"rk-cc1", "rk-cc2"}
	var cs []*gen.Child
	for i, client := range clients {
		c, err := e.StartReadyOn(ctx, []string{addr}, gen.JavaConsumer, coordCloseConsumer(client))
		if err != nil {
			return err
		}
		cs = append(cs, c)
		if err := e.WaitFor(ctx, fmt.Sprintf("%d consumers in one generation", i+1), sameGen(clients[:i+1]...)); err != nil {
			return err
		}
	}
	if err := e.Produce(ctx, "rk-producer-1", coordCloseTopic, 30); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "30 records committed", committedBy(coordCloseTopic, 30, clients...)); err != nil {
		return err
	}
	// Every FindCoordinator connection closes (idle) while the group runs;
	// the group's requests went on others.
	for _, client := range clients {
		fcs := fcConns(rec, client)
		if len(fcs) == 0 {
			return fmt.Errorf("%s sent no FindCoordinator", client)
		}
		for _, c := range fcs {
			if c.Node == coord {
				return fmt.Errorf("%s asked FindCoordinator of the coordinator, node %d", client, coord)
			}
			if apis := carriedGroup(rec, c); len(apis) > 0 {
				return fmt.Errorf("%s's FindCoordinator connection %d carried group traffic too: %v", client, c.ID, apis)
			}
			select {
			case <-c.Done():
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s's FindCoordinator connection %d to close: %w", client, c.ID, ctx.Err())
			}
			e.Logf("%s's FindCoordinator connection %d (%s -> node %d) closed", client, c.ID, c.Client, c.Node)
		}
	}
	if err := e.Produce(ctx, "rk-producer-2", coordCloseTopic, 30); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "60 records committed", committedBy(coordCloseTopic, 60, clients...)); err != nil {
		return err
	}
	if _, err := e.coordinator(ctx, coordCloseGroup); err != nil {
		return err
	}
	for _, c := range slices.Backward(cs) {
		if err := c.Terminate(ctx); err != nil {
			return fmt.Errorf("close: %w", err)
		}
	}
	return nil
}
