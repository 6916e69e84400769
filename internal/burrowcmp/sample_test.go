package burrowcmp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kwire/kwire/internal/gen"
	"github.com/kwire/kwire/internal/realgen"
	"github.com/kwire/kwire/internal/realkafka"
)

// sample is one moment of the run: what Burrow's API said then, and the
// capture up to then, which kwire reads after the run.
type sample struct {
	name    string
	at      time.Time
	settled bool // Burrow had read the last commits and end offsets
	capture string
	ends    [parts]int64 // the producer's, then
	burrow  map[string]*GroupStatus
	kwire   map[string]map[int32]kwirePart
}

// kwirePart is what the comparison reads of a group partition in kwire's
// summary.
type kwirePart struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     *int64 `json:"committed"`
	EndOffset     *int64 `json:"end_offset"`
	EndOffsetFrom string `json:"end_offset_from"`
	Lag           *int64 `json:"lag"`
	Health        *struct {
		State    string `json:"state"`
		Evidence string `json:"evidence"`
	} `json:"health"`
}

// settle waits (until deadline at the latest) for Burrow to have the end
// offsets the producer got acknowledged and, for every group, the last
// commit its consumer got accepted (the Java driver's committed reports),
// and to have evaluated the group since: then both tools rest on the same
// offsets, and their lags must be equal.
func (r *run) settle(ctx context.Context, deadline time.Time) bool {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if r.caughtUp(ctx) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

func (r *run) caughtUp(ctx context.Context) bool {
	ends, err := r.b.EndOffsets(ctx, topic)
	r.mu.Lock()
	want := r.ends
	r.mu.Unlock()
	if err != nil || !slices.Equal(ends, want[:]) {
		return false
	}
	last := lastCommits(r.e.Reports())
	for _, s := range scenarios {
		st, err := r.b.Lag(ctx, s.group)
		if err != nil || len(st.Partitions) != parts {
			return false
		}
		for _, p := range st.Partitions {
			if p.End == nil || p.End.Offset != last[s.group][p.Partition] {
				return false
			}
			// The evaluator caches a group's answer (expire-cache, 1 s):
			// its lag must rest on the end offset just checked.
			if end := want[p.Partition]; p.End.Offset+p.CurrentLag != end && (p.CurrentLag != 0 || p.End.Offset < end) {
				return false
			}
		}
	}
	return true
}

// lastCommits returns each group's last accepted commit per partition of
// topic, from the Java consumers' committed reports.
func lastCommits(rs []realgen.Report) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for _, r := range rs {
		if r.Kind != "committed" {
			continue
		}
		for ps, off := range r.Offsets[topic] {
			p, _ := strconv.Atoi(ps)
			if out[r.Group] == nil {
				out[r.Group] = map[int32]int64{}
			}
			out[r.Group][int32(p)] = off
		}
	}
	return out
}

// sample asks Burrow for every group's lag and status, then writes the
// capture so far (without the controller quorum's listeners: no group
// traffic there).
func (r *run) sample(ctx context.Context, name string, settled bool) {
	s := &sample{name: name, at: time.Now(), settled: settled, burrow: map[string]*GroupStatus{},
		capture: filepath.Join(r.dir, "sample-"+name+".pcapng")}
	r.mu.Lock()
	s.ends = r.ends
	r.mu.Unlock()
	for _, sc := range scenarios {
		st, err := r.b.Lag(ctx, sc.group)
		if errors.Is(err, ErrNotFound) && !settled {
			continue // no commit of the group read yet
		}
		if err != nil {
			r.t.Errorf("sample %s: %v", name, err)
			continue
		}
		s.burrow[sc.group] = st
	}
	ctrl := map[uint16]bool{}
	for _, p := range r.c.Ports(realkafka.ListenerController) {
		ctrl[uint16(p)] = true
	}
	if _, err := r.c.Recorder().WritePcapng(s.capture, gen.LinkEthernet, func(conn *gen.Conn) bool {
		return !ctrl[conn.Server.Port()]
	}); err != nil {
		r.t.Fatalf("sample %s: write capture: %v", name, err)
	}
	r.samples = append(r.samples, s)
}

// analyze runs kwire analyze --json on the sample's capture and keeps its
// groups' partitions.
func (r *run) analyze(kwire string, s *sample) {
	r.analyzeWith(kwire, s, r.c.Ports(realkafka.ListenerPlaintext))
}

func (r *run) analyzeWith(kwire string, s *sample, ports []int) {
	var ps []string
	for _, p := range ports {
		ps = append(ps, strconv.Itoa(p))
	}
	cmd := exec.Command(kwire, "analyze", "--json", "--health-window", healthWindow.String(),
		"--port", strings.Join(ps, ","), s.capture)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("kwire analyze %s: %v\n%s", s.capture, err, stderr.String())
	}
	var sum struct {
		Type   string `json:"type"`
		Groups []struct {
			Group      string      `json:"group"`
			Partitions []kwirePart `json:"partitions"`
		} `json:"groups"`
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(`"type":"summary"`)) {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &sum); err != nil {
			r.t.Fatalf("kwire summary of %s: %v", s.capture, err)
		}
	}
	if sum.Type != "summary" {
		r.t.Fatalf("kwire analyze %s wrote no summary line", s.capture)
	}
	s.kwire = map[string]map[int32]kwirePart{}
	for _, g := range sum.Groups {
		for _, p := range g.Partitions {
			if p.Topic != topic {
				continue
			}
			if s.kwire[g.Group] == nil {
				s.kwire[g.Group] = map[int32]kwirePart{}
			}
			s.kwire[g.Group][p.Partition] = p
		}
	}
}
