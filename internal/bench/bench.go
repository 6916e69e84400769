package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Command is one command to time. Argv may use {file} (the capture),
// {kwire} (the kwire binary) and {ports} (the broker ports, as kwire's
// --port takes them); Expand fills them in.
type Command struct {
	Name string
	Argv []string
	// Probe, if set, is run once (output discarded); a non-zero exit means
	// the command is not available (e.g. `kwire analyze -h` before analyze
	// exists) and it is left out with a note.
	Probe []string
}

// Vars are the values of Command placeholders.
type Vars struct {
	File, Kwire string
	// Ports are the broker ports, e.g. "29092-29094".
	Ports string
}

// Default is the comparison of issue 8. Add a command here (or with
// kwire-bench -cmd) to compare it too.
var Default = []Command{
	{Name: "cat", Argv: []string{"cat", "{file}"}},
	{Name: "kwire read", Argv: []string{"{kwire}", "read", "--json", "--port", "{ports}", "{file}"}},
	{
		Name:  "kwire analyze",
		Argv:  []string{"{kwire}", "analyze", "--json", "--port", "{ports}", "{file}"},
		Probe: []string{"{kwire}", "analyze", "-h"},
	},
	{Name: "tshark", Argv: []string{"tshark", "-r", "{file}", "{tshark-ports}", "-V"}, Probe: []string{"tshark", "-v"}},
}

// Expand returns argv with placeholders filled in. {tshark-ports} becomes
// one `-d tcp.port==P,kafka` pair per port, as tshark's Kafka dissector
// only looks at the ports it is told about.
func (v Vars) Expand(argv []string) ([]string, error) {
	var out []string
	for _, a := range argv {
		if a == "{tshark-ports}" {
			ports, err := expandPorts(v.Ports)
			if err != nil {
				return nil, err
			}
			for _, p := range ports {
				out = append(out, "-d", fmt.Sprintf("tcp.port==%d,kafka", p))
			}
			continue
		}
		a = strings.NewReplacer("{file}", v.File, "{kwire}", v.Kwire, "{ports}", v.Ports).Replace(a)
		out = append(out, a)
	}
	return out, nil
}

// expandPorts reads a port list like kwire's --port: 9092,9093 or
// 29092-29094.
func expandPorts(s string) ([]int, error) {
	bad := fmt.Errorf("bad port list %q: use e.g. 9092,9093 or 29092-29094", s)
	var out []int
	for _, part := range strings.Split(s, ",") {
		from, to, isRange := strings.Cut(strings.TrimSpace(part), "-")
		lo, err := strconv.Atoi(from)
		if err != nil {
			return nil, bad
		}
		hi := lo
		if isRange {
			if hi, err = strconv.Atoi(to); err != nil || hi < lo {
				return nil, bad
			}
		}
		for p := lo; p <= hi; p++ {
			out = append(out, p)
		}
	}
	return out, nil
}

// Run is one timed run of a command.
type Run struct {
	Wall       time.Duration
	MaxRSSKiB  int64 // the process's peak resident set (rusage ru_maxrss)
	User, Sys  time.Duration
	ExitStatus int
}

// Measure runs argv once with stdout on /dev/null and stderr kept (the
// last 4 KiB are in the error if it fails).
func Measure(argv []string) (Run, error) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return Run{}, err
	}
	defer devnull.Close()
	var stderr tailBuffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = devnull, &stderr
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if cmd.ProcessState == nil {
		return Run{}, fmt.Errorf("%s: %w", argv[0], err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r := Run{
		Wall:       wall,
		MaxRSSKiB:  ru.Maxrss, // KiB on Linux
		User:       time.Duration(ru.Utime.Nano()),
		Sys:        time.Duration(ru.Stime.Nano()),
		ExitStatus: cmd.ProcessState.ExitCode(),
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, stderr.String())
	}
	return r, nil
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(string(t.b)) }

// KafkaFrames runs `kwire read --json` on the capture (untimed) and
// returns requests + responses from its final stats line.
func KafkaFrames(v Vars) (int64, error) {
	cmd := exec.Command(v.Kwire, "read", "--json", "--port", v.Ports, v.File)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr tailBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	last, scanErr := lastLine(out)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("kwire read: %w: %s", err, stderr.String())
	}
	if scanErr != nil {
		return 0, scanErr
	}
	var st struct {
		Type   string `json:"type"`
		Decode struct {
			Requests  int64 `json:"requests"`
			Responses int64 `json:"responses"`
		} `json:"decode"`
	}
	if err := json.Unmarshal(last, &st); err != nil || st.Type != "stats" {
		return 0, fmt.Errorf("kwire read: last line is not a stats line: %.200s", last)
	}
	return st.Decode.Requests + st.Decode.Responses, nil
}

func lastLine(r io.Reader) ([]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var last []byte
	for sc.Scan() {
		last = append(last[:0], sc.Bytes()...)
	}
	if len(last) == 0 && sc.Err() == nil {
		return nil, errors.New("kwire read: no output")
	}
	return last, sc.Err()
}

// Result is every run of one command.
type Result struct {
	Command Command
	Runs    []Run
}

// Median is the run with the median wall time.
func (r *Result) Median() Run {
	runs := slices.Clone(r.Runs)
	slices.SortFunc(runs, func(a, b Run) int { return int(a.Wall - b.Wall) })
	return runs[len(runs)/2]
}

// MaxRSSKiB is the largest max RSS over the runs.
func (r *Result) MaxRSSKiB() int64 {
	var m int64
	for _, run := range r.Runs {
		m = max(m, run.MaxRSSKiB)
	}
	return m
}
