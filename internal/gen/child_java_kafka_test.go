package gen

// TEMPORARY (issue 37): a single-node KRaft Apache Kafka 4.4.0 for the
// Java driver's tests, until internal/realkafka (the project's 3-node
// cluster) lands; then tempKafka's callers switch to it and this file goes.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tempKafkaPom resolves the broker's jars from Maven Central. Kafka 4.4.0
// declares slf4j-api 1.7.36, so the log4j2 binding is log4j-slf4j-impl.
const tempKafkaPom = `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kwire.tmp</groupId>
  <artifactId>broker44</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>4.4.0</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.25.5</version></dependency>
  </dependencies>
</project>
`

const tempKafkaLog4j = `status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stderr.ref = STDERR
`

// tempKafkaLib returns a directory of the broker's jars, resolved once
// into the user cache directory (Maven's own cache is ~/.m2).
func tempKafkaLib(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "kwire", "kafka-4.4.0-tmp")
	lib := filepath.Join(dir, "lib")
	if _, err := os.Stat(filepath.Join(lib, "kafka_2.13-4.4.0.jar")); err == nil {
		return lib
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		javaSkip(t, "no mvn to resolve Apache Kafka 4.4.0 (install Maven)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pom.xml"), []byte(tempKafkaPom), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("mvn", "-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory=lib", "-DincludeScope=runtime")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("resolve Apache Kafka 4.4.0 with Maven in %s: %v\n%s", dir, err, out)
	}
	return lib
}

// freePorts returns n free loopback ports.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// tempKafka formats and starts a combined broker+controller (node 1) and
// returns its client address once it answers Metadata with itself. It is
// stopped (SIGTERM, then SIGKILL) at cleanup; its log is printed if the
// test failed.
func tempKafka(t *testing.T, java string) string {
	t.Helper()
	lib := tempKafkaLib(t)
	dir := t.TempDir()
	ports := freePorts(t, 2)
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
listeners=PLAINTEXT://%[1]s,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://%[1]s
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=%[3]s
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=3
group.initial.rebalance.delay.ms=0
group.share.min.record.lock.duration.ms=1000
group.share.record.lock.duration.ms=5000
group.share.delivery.count.limit=3
num.network.threads=2
num.io.threads=2
background.threads=2
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=2097152
`, addr, ports[1], filepath.Join(dir, "data"))
	cfg := filepath.Join(dir, "server.properties")
	l4j := filepath.Join(dir, "log4j2.properties")
	for f, s := range map[string]string{cfg: props, l4j: tempKafkaLog4j} {
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cp := filepath.Join(lib, "*")
	format := exec.Command(java, "-cp", cp, "kafka.tools.StorageTool", "format", "-t", "kwire-tmp-cluster-0001", "-c", cfg)
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("format the broker's storage: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(java, "-Xms256m", "-Xmx768m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+l4j, "-cp", cp, "kafka.Kafka", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	setChildAttrs(cmd)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if i := bytes.LastIndex(b[:max(len(b)-8000, 0)], []byte("\n")); i > 0 {
				b = b[i:]
			}
			t.Logf("broker log (tail):\n%s", b)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := waitKafka(ctx, addr, exited); err != nil {
		t.Fatalf("Apache Kafka 4.4.0 on %s: %v", addr, err)
	}
	t.Logf("Apache Kafka 4.4.0 (KRaft, 1 node) up on %s in %v", addr, time.Since(start).Round(time.Millisecond))
	return addr
}

// waitKafka waits until the broker answers Metadata listing itself.
func waitKafka(ctx context.Context, addr string, exited <-chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err == nil && len(resp.Brokers) == 1 {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("broker exited while starting (see its log)")
		case <-ctx.Done():
			return fmt.Errorf("not ready: %v (last: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// javaSkip skips a Java test with why, or fails it under CI (CI=true),
// where Java and Maven must be there.
func javaSkip(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" && !strings.EqualFold(os.Getenv("CI"), "false") {
		t.Fatalf("CI is set, so the Java driver tests must run: %s", why)
	}
	t.Skip(why)
}
