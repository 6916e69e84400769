package gen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultTimeout bounds one run of a scenario.
const DefaultTimeout = 45 * time.Second

// ErrRetry is returned (wrapped) by a Scenario's Run or Edit when the
// traffic happened not to have the shape the scenario needs; Run tries
// again with a fresh cluster, up to Scenario.Attempts times.
var ErrRetry = errors.New("traffic did not have the needed shape")

// Scenario is one capture case.
type Scenario struct {
	Name    string
	Doc     string
	Options Options
	// Timeout bounds one attempt; default DefaultTimeout.
	Timeout time.Duration
	// Attempts is how often to try when Run or Edit return ErrRetry;
	// default 1.
	Attempts int
	// Run drives clients against c. It must return before ctx is done
	// and should close what it opened (the cluster closes leftovers).
	Run func(ctx context.Context, c *Cluster) error
	// Edit, if set, is called after the traffic is over (c is closed)
	// to choose packets to leave out of the files.
	Edit func(c *Cluster) (*Edit, error)

	// Explicit scenarios are not part of the default set: kwire-gen runs
	// them only when named with -only (bulk makes a capture of a gigabyte).
	Explicit bool
	// Size is the capture size to aim for, in bytes, for scenarios that
	// grow to one (bulk); 0 means the scenario's default.
	Size int64
	// Stream, if set, replaces Run, Edit and Cluster.Write: it drives
	// clients and writes its capture(s) and truth into dir while the
	// traffic happens, for captures too large to hold in memory. It must
	// close c before it writes the end of its capture.
	Stream func(ctx context.Context, c *Cluster, dir string, size int64) (*Truth, error)
}

var (
	regMu     sync.Mutex
	scenarios []Scenario
)

// Register adds s to the registry. Names must be unique.
func Register(s Scenario) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, o := range scenarios {
		if o.Name == s.Name {
			panic("gen: scenario registered twice: " + s.Name)
		}
	}
	scenarios = append(scenarios, s)
}

// Scenarios returns the registered scenarios in registration order.
func Scenarios() []Scenario {
	regMu.Lock()
	defer regMu.Unlock()
	return append([]Scenario(nil), scenarios...)
}

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Run runs s and writes its capture(s) and truth into dir.
func Run(ctx context.Context, s Scenario, dir string) (*Truth, error) {
	attempts := max(s.Attempts, 1)
	var err error
	for i := 0; i < attempts; i++ {
		var t *Truth
		t, err = runOnce(ctx, s, dir)
		if err == nil {
			if i > 0 {
				t.Notes = append(t.Notes, fmt.Sprintf("made on attempt %d", i+1))
			}
			return t, nil
		}
		if !errors.Is(err, ErrRetry) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
}

func runOnce(ctx context.Context, s Scenario, dir string) (*Truth, error) {
	timeout := s.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := NewCluster(&s.Options)
	if err != nil {
		return nil, err
	}
	if s.Stream != nil {
		t, err := s.Stream(ctx, c, dir, s.Size)
		c.Close() // a no-op when Stream closed it, as it must on success
		return t, err
	}
	err = s.Run(ctx, c)
	c.Close()
	if err != nil {
		return nil, err
	}
	var edit *Edit
	if s.Edit != nil {
		if edit, err = s.Edit(c); err != nil {
			return nil, err
		}
	}
	return c.Write(dir, s.Name, s.Doc, edit)
}
