package gen

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitStable waits until the broker reports group Stable with n members
// that own all parts partitions between them, and keeps that state as a
// snapshot: the KIP-848 generations, and a cross-check for classic ones.
func (c *Cluster) waitStable(ctx context.Context, group string, n, parts int) (*kfake.GroupInfo, error) {
	gi, err := c.kf.WaitGroupInfo(ctx, group, func(g *kfake.GroupInfo) bool {
		return g != nil && g.State == "Stable" && len(g.Members) == n && g.NumAssigned() == parts
	})
	if err != nil {
		return nil, fmt.Errorf("group %s never stable with %d members owning %d partitions (now %+v): %w", group, n, parts, gi, err)
	}
	topics := map[string]int32{}
	for _, m := range gi.Members {
		for _, t := range m.SubscribedTopics {
			topics[t] = int32(len(c.kf.PartitionInfos(t)))
		}
	}
	c.groups.mu.Lock()
	c.groups.snaps[group] = append(c.groups.snaps[group], groupSnap{info: gi, topics: topics, at: time.Now()})
	c.groups.mu.Unlock()
	// The members' own view must agree once their callbacks ran.
	deadline := time.Now().Add(3 * time.Second)
	for {
		bad := c.groups.ownedMismatch(gi)
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.groups.note("group %s generation %d stable at the broker, but members disagree: %v", group, gi.Epoch, bad)
			break
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	return gi, nil
}

// waitCaughtUp waits until group has committed every partition of topic
// up to its high watermark.
func (c *Cluster) waitCaughtUp(ctx context.Context, group, topic string) error {
	for {
		gi := c.kf.GroupInfo(group)
		behind := 0
		for _, p := range c.kf.PartitionInfos(topic) {
			if gi == nil || gi.Commits[topic][p.Partition].Offset != p.HighWatermark {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group %s: %d partitions of %s not committed up to their end: %w", group, behind, topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kip848 marks group as a KIP-848 consumer group with the given server
// assignor: its generations are the broker's stable group epochs.
func (c *Cluster) kip848(group, assignor string) {
	c.groups.mu.Lock()
	c.groups.kip848[group] = assignor
	c.groups.mu.Unlock()
}

// AddHazard records a hazard the scenario drove.
func (c *Cluster) AddHazard(h Hazard) { c.groups.add(groupReport{Kind: "hazard", Hazard: &h}) }

// RecordGroups records each group's final state (DescribeGroups, or
// ConsumerGroupDescribe for KIP-848 groups, sent by a truth client, so in
// the capture) and committed offsets (RecordCommitted).
func (c *Cluster) RecordGroups(ctx context.Context, groups ...string) error {
	cl, err := c.truthClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, g := range groups {
		c.groups.mu.Lock()
		_, is848 := c.groups.kip848[g]
		c.groups.mu.Unlock()
		var f *GroupFinal
		if is848 {
			f, err = c.describe848(ctx, cl.Request, g)
		} else {
			f, err = c.describeClassic(ctx, cl.Request, g)
		}
		if err != nil {
			return err
		}
		c.groups.mu.Lock()
		c.groups.finals[g] = f
		c.groups.mu.Unlock()
	}
	return c.RecordCommitted(ctx, groups...)
}

type requestFn func(context.Context, kmsg.Request) (kmsg.Response, error)

func (c *Cluster) describeClassic(ctx context.Context, request requestFn, group string) (*GroupFinal, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	kresp, err := request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	resp := kresp.(*kmsg.DescribeGroupsResponse)
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("describe group %s: %d groups in the answer", group, len(resp.Groups))
	}
	rg := resp.Groups[0]
	if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	f := &GroupFinal{State: rg.State, Protocol: rg.Protocol, Members: []FinalMember{}}
	// DescribeGroups carries no generation: take the broker's.
	if gi := c.kf.GroupInfo(group); gi != nil {
		f.Generation = gi.Epoch
	}
	for _, m := range rg.Members {
		fm := FinalMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, InstanceID: m.InstanceID, Assignment: map[string][]int32{}}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.MemberAssignment); err == nil {
			for _, t := range a.Topics {
				fm.Assignment[t.Topic] = append(fm.Assignment[t.Topic], t.Partitions...)
			}
		}
		fm.Assignment = normAssignment(fm.Assignment)
		f.Members = append(f.Members, fm)
	}
	return f, nil
}

func (c *Cluster) describe848(ctx context.Context, request requestFn, group string) (*GroupFinal, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	kresp, err := request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe consumer group %s: %w", group, err)
	}
	resp := kresp.(*kmsg.ConsumerGroupDescribeResponse)
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("describe consumer group %s: %d groups in the answer", group, len(resp.Groups))
	}
	rg := resp.Groups[0]
	if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
		return nil, fmt.Errorf("describe consumer group %s: %w", group, err)
	}
	f := &GroupFinal{State: rg.State, Generation: rg.Epoch, Protocol: rg.AssignorName, Members: []FinalMember{}}
	for _, m := range rg.Members {
		fm := FinalMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, InstanceID: m.InstanceID, Assignment: map[string][]int32{}}
		for _, t := range m.Assignment.TopicPartitions {
			name := t.Topic
			if ti := c.kf.TopicIDInfo(t.TopicID); name == "" && ti != nil {
				name = ti.Topic
			}
			fm.Assignment[name] = append(fm.Assignment[name], t.Partitions...)
		}
		fm.Assignment = normAssignment(fm.Assignment)
		f.Members = append(f.Members, fm)
	}
	return f, nil
}
