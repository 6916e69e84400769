package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// MemberArgs are the arguments of the "member" child: one kgo consumer
// group member that commits after every poll.
type MemberArgs struct {
	ClientID string   `json:"client_id"`
	Group    string   `json:"group"`
	Topics   []string `json:"topics"`
	// InstanceID, if set, makes the member static (KIP-345).
	InstanceID string `json:"instance_id,omitempty"`
	// SessionTimeoutMillis defaults to 6000.
	SessionTimeoutMillis int `json:"session_timeout_ms,omitempty"`
	// Balancer is "cooperative-sticky" (default), "sticky", "range" or
	// "roundrobin".
	Balancer string `json:"balancer,omitempty"`
	// ServerSide uses the KIP-848 consumer protocol.
	ServerSide bool `json:"server_side,omitempty"`
}

func (a MemberArgs) opts() ([]kgo.Opt, error) {
	opts := groupOpts(a.ClientID, a.Group, a.Topics...)
	if a.SessionTimeoutMillis > 0 {
		opts = append(opts, kgo.SessionTimeout(time.Duration(a.SessionTimeoutMillis)*time.Millisecond))
	}
	if a.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(a.InstanceID))
	}
	switch a.Balancer {
	case "", "cooperative-sticky":
	case "sticky":
		opts = append(opts, kgo.Balancers(kgo.StickyBalancer()))
	case "range":
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	case "roundrobin":
		opts = append(opts, kgo.Balancers(kgo.RoundRobinBalancer()))
	default:
		return nil, fmt.Errorf("unknown balancer %q", a.Balancer)
	}
	if a.ServerSide {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	return opts, nil
}

// childMember runs one group member until SIGTERM or its deadline, then
// closes (LeaveGroup, unless static). It reports ready once it first owns
// partitions. Kill it to model a crash, Stop it to model a long pause.
func childMember(ctx context.Context, env *ChildEnv) error {
	var a MemberArgs
	if err := json.Unmarshal(env.Args, &a); err != nil {
		return err
	}
	opts, err := a.opts()
	if err != nil {
		return err
	}
	var once sync.Once
	opts = append(opts,
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(env.Ready) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
		}),
	)
	cl, err := env.Kgo(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			break
		}
		if len(fs.Records()) > 0 {
			_ = cl.CommitUncommittedOffsets(ctx)
		}
	}
	return nil
}
