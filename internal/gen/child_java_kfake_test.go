package gen

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStartJavaKfake runs two Java classic consumers through
// Cluster.StartJava on kwire's own tapped kfake cluster: their plan and
// sync reports reach the cluster's groups truth, whose rebuilt generation
// (number, leader, members, assignments) is the broker's own (kfake
// GroupInfo).
func TestStartJavaKfake(t *testing.T) {
	if testing.Short() {
		t.Skip("starts JVMs")
	}
	if _, err := FindJavaDriver(); err != nil {
		javaSkip(t, err.Error())
	}
	c, err := NewCluster(&Options{Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := c.Kgo(kgo.DefaultProduceTopic("jk"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kfake().CreateTopic("jk", 4, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 4), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var chs []*Child
	for _, id := range []string{"jk-0", "jk-1"} {
		ch, err := c.StartJava(ctx, JavaConsumer, map[string]any{"group": "jk", "topics": []string{"jk"},
			"client_id": id, "assignor": "range"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch.Ready():
		case <-ch.Done():
			t.Fatalf("%s exited before owning partitions: %v", id, ch.err)
		case <-ctx.Done():
			t.Fatalf("%s: %v", id, ctx.Err())
		}
		chs = append(chs, ch)
	}
	// The Java members' reports (the leader's plan, every member's sync)
	// against the broker's own view of the group.
	type view struct {
		Generation int32
		Leader     bool // the plan's leader is a member
		Members    map[string]map[string][]int32
	}
	fromReports := func() view {
		gs, _ := c.groups.gensClassic("jk")
		if len(gs) == 0 {
			return view{}
		}
		g := gs[len(gs)-1]
		v := view{Generation: g.Generation, Members: map[string]map[string][]int32{}}
		_, v.Leader = g.Members[g.Leader]
		for id, m := range g.Members {
			v.Members[id] = m.Assignment
		}
		return v
	}
	fromBroker := func() view {
		gi := c.Kfake().GroupInfo("jk")
		if gi == nil || gi.State != "Stable" {
			return view{}
		}
		v := view{Generation: gi.Epoch, Leader: true, Members: map[string]map[string][]int32{}}
		for _, m := range gi.Members {
			v.Members[m.MemberID] = normAssignment(m.Assignment)
		}
		return v
	}
	split := func(v view) bool {
		if len(v.Members) != 2 {
			return false
		}
		for _, a := range v.Members {
			if len(a["jk"]) != 2 {
				return false
			}
		}
		return true
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !split(fromBroker()) || cmpJSON(fromBroker(), fromReports()) != "" {
		select {
		case <-ctx.Done():
			t.Fatalf("the Java members' reports never matched the broker's stable 2/2 split (-broker +reports):\n%s",
				cmpJSON(fromBroker(), fromReports()))
		case <-tick.C:
		}
	}
	for _, ch := range chs {
		if err := ch.Terminate(ctx); err != nil {
			t.Errorf("%s: %v", ch.Name, err)
		}
	}
}
