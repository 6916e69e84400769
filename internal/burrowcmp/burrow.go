package burrowcmp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kwire/kwire/internal/realkafka"
)

// ErrMissing is returned (wrapped, saying what is missing and how to get
// it) when Burrow or what it needs is not installed.
var ErrMissing = errors.New("burrow cannot start")

// ErrNotFound is returned (wrapped) for a group or topic Burrow does not
// know: a group is known from the first commit of it Burrow reads.
var ErrNotFound = errors.New("burrow: not found")

// Cluster is the name Burrow knows the cluster by, in its API's paths.
const Cluster = "kwire"

// Options configures Start.
type Options struct {
	// Brokers are the bootstrap servers of the cluster Burrow watches.
	Brokers []string
	// KafkaVersion is the client profile's kafka-version: which protocol
	// versions Burrow's sarama client sends. Burrow 1.2.1 knows versions
	// up to 2.1.0.
	KafkaVersion string
	// Java runs ZooKeeper; ZooKeeperLib is a directory of jars holding
	// ZooKeeper's server (Kafka 3.9's lib/ has ZooKeeper 3.8).
	Java, ZooKeeperLib string
	// Dir holds burrow.toml, Burrow's and ZooKeeper's logs and data.
	Dir string
	// Intervals is how many commits Burrow keeps per partition and
	// evaluates (storage intervals); OffsetRefresh how often, in seconds,
	// it asks the brokers for their end offsets; MinDistance the seconds
	// two commits must be apart to take two places in its window.
	Intervals, OffsetRefresh, MinDistance int
}

// Burrow is a running Burrow (and the ZooKeeper it needs).
type Burrow struct {
	// API is the base URL of Burrow's HTTP API.
	API string
	// Log is Burrow's log file.
	Log string

	burrow, zk *exec.Cmd
}

// Find returns the Burrow executable: Debian's package installs it as
// /usr/bin/Burrow.
func Find() (string, error) {
	for _, name := range []string{"Burrow", "burrow"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: no Burrow on PATH: run make test-deps (apt-get install burrow)", ErrMissing)
}

// Start starts ZooKeeper and Burrow watching o.Brokers, and waits until
// Burrow's HTTP API answers. Burrow 1.2.1 takes a lock in ZooKeeper for its
// notifiers and will not start without one, though it reads the offsets
// from Kafka itself (__consumer_offsets), so a standalone ZooKeeper runs
// beside it. On error, what was started is stopped.
func Start(ctx context.Context, o Options) (*Burrow, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	if m, _ := filepath.Glob(filepath.Join(o.ZooKeeperLib, "zookeeper-3*.jar")); len(m) == 0 {
		return nil, fmt.Errorf("%w: no ZooKeeper jar in %s: run make realkafka-deps", ErrMissing, o.ZooKeeperLib)
	}
	ports, err := realkafka.FreePorts(2)
	if err != nil {
		return nil, err
	}
	zkAddr, httpAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	b := &Burrow{API: "http://" + httpAddr, Log: filepath.Join(o.Dir, "burrow.log")}
	b.zk = exec.Command(o.Java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.admin.enableServer=false", "-Dlog4j.configuration=file:/dev/null",
		"-cp", filepath.Join(o.ZooKeeperLib, "*"), "org.apache.zookeeper.server.ZooKeeperServerMain",
		strconv.Itoa(ports[0]), filepath.Join(o.Dir, "zookeeper"))
	if err := startLogged(b.zk, filepath.Join(o.Dir, "zookeeper.log")); err != nil {
		return nil, fmt.Errorf("burrow: start zookeeper: %w", err)
	}
	if err := waitZooKeeper(ctx, zkAddr, b.zk); err != nil {
		b.Stop()
		return nil, fmt.Errorf("burrow: zookeeper: %w (log %s)", err, filepath.Join(o.Dir, "zookeeper.log"))
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "burrow.toml"), []byte(config(o, zkAddr, httpAddr)), 0o644); err != nil {
		b.Stop()
		return nil, err
	}
	b.burrow = exec.Command(bin, "-config-dir", o.Dir)
	b.burrow.Dir = o.Dir
	if err := startLogged(b.burrow, filepath.Join(o.Dir, "burrow.out")); err != nil {
		b.Stop()
		return nil, fmt.Errorf("burrow: start: %w", err)
	}
	if err := b.waitAPI(ctx); err != nil {
		b.Stop()
		return nil, fmt.Errorf("burrow: %w (log %s)", err, b.Log)
	}
	return b, nil
}

// config is Burrow's burrow.toml: one cluster, its consumer offsets read
// from __consumer_offsets, in-memory storage, the caching evaluator with a
// one-second cache, and the HTTP API on loopback.
func config(o Options, zk, http string) string {
	servers := `"` + strings.Join(o.Brokers, `", "`) + `"`
	return fmt.Sprintf(`[general]
pidfile = %[1]q

[logging]
filename = %[2]q
level = "debug"

[zookeeper]
servers = [ %[3]q ]
timeout = 6
root-path = "/burrow"

[client-profile.kwire]
client-id = "burrow"
kafka-version = %[4]q

[cluster.%[5]s]
class-name = "kafka"
servers = [ %[6]s ]
client-profile = "kwire"
topic-refresh = 1
offset-refresh = %[7]d

[consumer.%[5]s]
class-name = "kafka"
cluster = %[5]q
servers = [ %[6]s ]
client-profile = "kwire"
offsets-topic = "__consumer_offsets"
start-latest = false

[httpserver.default]
address = %[8]q

[storage.default]
class-name = "inmemory"
workers = 2
intervals = %[9]d
expire-group = 604800
min-distance = %[10]d

[evaluator.default]
class-name = "caching"
expire-cache = 1
`, filepath.Join(o.Dir, "burrow.pid"), filepath.Join(o.Dir, "burrow.log"), zk, o.KafkaVersion, Cluster,
		servers, o.OffsetRefresh, http, o.Intervals, o.MinDistance)
}

// startLogged starts cmd with its output going to the file at path, in a
// process group of its own (Stop signals the group).
func startLogged(cmd *exec.Cmd, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	f.Close()
	return err
}

// waitZooKeeper waits until the ZooKeeper at addr serves (its "srvr"
// command, the one four-letter word 3.8 allows by default, answers), or
// cmd exits. Its port accepts connections before it serves sessions, and
// a client that connects then is dropped.
func waitZooKeeper(ctx context.Context, addr string, cmd *exec.Cmd) error {
	for {
		if zkServes(addr) {
			return nil
		}
		if syscall.Kill(cmd.Process.Pid, 0) != nil {
			return fmt.Errorf("exited before serving on %s", addr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not listening on %s: %w", addr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// zkServes says whether the ZooKeeper at addr answers "srvr".
func zkServes(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return strings.Contains(string(b), "Mode: standalone")
}

// waitAPI waits until Burrow's API lists the cluster.
func (b *Burrow) waitAPI(ctx context.Context) error {
	for {
		var out struct {
			Clusters []string `json:"clusters"`
		}
		err := b.get(ctx, "/v3/kafka", &out)
		if err == nil && len(out.Clusters) > 0 {
			return nil
		}
		if syscall.Kill(b.burrow.Process.Pid, 0) != nil {
			return errors.New("exited while starting")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("API not up: %w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// get reads the API's JSON answer at path into v.
func (b *Burrow) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.API+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("GET %s: %w", path, ErrNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Stop ends Burrow and ZooKeeper (SIGKILL: nothing of theirs is kept).
func (b *Burrow) Stop() {
	for _, cmd := range []*exec.Cmd{b.burrow, b.zk} {
		if cmd == nil || cmd.Process == nil || cmd.ProcessState != nil {
			continue // never started, or stopped and reaped already
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
}

// waitTopic waits until Burrow knows topic's end offsets for all its
// partitions: Burrow drops the commits it reads before that.
func (b *Burrow) waitTopic(ctx context.Context, topic string, partitions int) error {
	for {
		ends, err := b.EndOffsets(ctx, topic)
		if err == nil && len(ends) == partitions {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("burrow: no end offsets of %s: %w (last: %v; log %s)", topic, ctx.Err(), err, b.Log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
