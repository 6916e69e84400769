package gen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Java driver modes (java/driver, kwire.driver.Main): each runs one Apache
// Kafka Java client (4.4.0, or 3.9.2: FindJavaDriverKafka3) and documents
// its args in its class.
const (
	JavaConsumer = "consumer" // KafkaConsumer: classic or KIP-848 group member
	JavaShare    = "share"    // KafkaShareConsumer (KIP-932)
	JavaProducer = "producer" // KafkaProducer: acks 0/1/all, idempotent
	JavaTxn      = "txn"      // transactional producer: commit, hang, zombie
	JavaCTP      = "ctp"      // consume-transform-produce, read_committed
	JavaStreams  = "streams"  // Kafka Streams, classic or streams protocol
	JavaAdmin    = "admin"    // Admin: reset offsets, delete offsets/records, describes
	JavaChurn    = "churn"    // a new producer and consumer (new client.id) per request
)

// ErrNoJavaDriver is returned (wrapped, saying what is missing) by
// FindJavaDriver when the Java driver cannot run here.
var ErrNoJavaDriver = errors.New("java driver unavailable")

// JavaDriverEnv, if set, names the java/driver directory (default: found
// from the working directory up to the module root).
const JavaDriverEnv = "KWIRE_JAVA_DRIVER"

// JavaDriver is a built java/driver: how to start kwire.driver.Main.
type JavaDriver struct {
	// Java is the java executable (JAVA_HOME/bin/java, else from PATH).
	Java string
	// Dir is the java/driver directory; Classpath its jar and target/lib.
	Dir, Classpath string
	// JVMArgs start every driver JVM (defaults: see FindJavaDriver).
	JVMArgs []string
	// Clients is the version of the kafka-clients jar it runs on.
	Clients string
}

// FindJavaDriver locates java and the built driver. Its error (wrapping
// ErrNoJavaDriver) says exactly what is missing and what to run: `make
// java-driver` (Maven and Java 17) builds the driver, and rebuilds it when
// a source under java/driver is newer than the jar.
func FindJavaDriver() (*JavaDriver, error) { return findJavaDriver("target", "make java-driver") }

// FindJavaDriverKafka3 locates the driver built on the Kafka 3.9.2 Java
// clients (java/driver/pom.xml profile kafka3, into target-kafka3/), so a
// 3.9 cluster hears a 3.9 client's request versions. It has the consumer,
// producer, txn and ctp modes; admin, share and streams need FindJavaDriver's.
func FindJavaDriverKafka3() (*JavaDriver, error) {
	return findJavaDriver("target-kafka3", "make java-driver (mvn -Pkafka3 package)")
}

// findJavaDriver locates the driver built into java/driver/<target>; fix
// is the command that builds it.
func findJavaDriver(target, fix string) (*JavaDriver, error) {
	dir, err := javaDriverDir()
	if err != nil {
		return nil, err
	}
	java := "java"
	if h := os.Getenv("JAVA_HOME"); h != "" {
		java = filepath.Join(h, "bin", "java")
	}
	if java, err = exec.LookPath(java); err != nil {
		return nil, fmt.Errorf("%w: no java executable (%v): install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless maven), then run make java-driver", ErrNoJavaDriver, err)
	}
	jar := filepath.Join(dir, target, "kwire-driver.jar")
	st, err := os.Stat(jar)
	if err != nil {
		return nil, fmt.Errorf("%w: %s not built: run %s (needs Maven and Maven Central)", ErrNoJavaDriver, jar, fix)
	}
	lib := filepath.Join(dir, target, "lib")
	m, _ := filepath.Glob(filepath.Join(lib, "kafka-clients-*.jar"))
	if len(m) != 1 {
		return nil, fmt.Errorf("%w: %d kafka-clients jars in %s, want one: run %s", ErrNoJavaDriver, len(m), lib, fix)
	}
	if newer := newerThan(dir, st.ModTime()); newer != "" {
		return nil, fmt.Errorf("%w: %s is newer than %s: run %s", ErrNoJavaDriver, newer, jar, fix)
	}
	clients := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), "kafka-clients-"), ".jar")
	return &JavaDriver{Java: java, Dir: dir, Clients: clients, Classpath: jar + string(os.PathListSeparator) + filepath.Join(lib, "*"),
		// One client per JVM on a shared 2-core box: C1 only and the
		// serial collector start faster and use fewer threads.
		JVMArgs: []string{"-Xms32m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"}}, nil
}

// javaDriverDir is $KWIRE_JAVA_DRIVER or <module root>/java/driver.
func javaDriverDir() (string, error) {
	if d := os.Getenv(JavaDriverEnv); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoJavaDriver, err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/kwire/kwire\n") {
			return filepath.Join(d, "java", "driver"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%w: no kwire module above %s: set %s to the java/driver directory", ErrNoJavaDriver, wd, JavaDriverEnv)
		}
	}
}

// newerThan returns a source file of the driver (pom.xml, src/) modified
// after t, or "".
func newerThan(dir string, t time.Time) string {
	var found string
	check := func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return nil
		}
		if info, err := d.Info(); err == nil && info.ModTime().After(t) {
			found = path
		}
		return nil
	}
	_ = filepath.WalkDir(filepath.Join(dir, "pom.xml"), check)
	_ = filepath.WalkDir(filepath.Join(dir, "src"), check)
	return found
}

// Start starts the driver in mode (JavaConsumer...) with args (marshaled
// to JSON) against brokers. Report lines go to line (nil: dropped); the
// Child's Ready, Done, Kill, Stop, Cont and Terminate work as for
// StartChild's children (SIGTERM closes the Java client gracefully:
// LeaveGroup, transaction abort). The JVM dies with the generator (Linux)
// and by ctx's deadline at the latest.
func (d *JavaDriver) Start(ctx context.Context, brokers []string, mode string, args any, line func([]byte)) (*Child, error) {
	cmd := exec.Command(d.Java, append(append([]string{}, d.JVMArgs...), "-cp", d.Classpath, "kwire.driver.Main", mode)...)
	stdout, err := startSpec(ctx, cmd, childSpec{Brokers: brokers}, args)
	if err != nil {
		return nil, fmt.Errorf("start java driver %s: %w", mode, err)
	}
	if line == nil {
		line = func([]byte) {}
	}
	ch := &Child{Name: "java:" + mode, cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	go ch.serve(stdout, line, nil)
	return ch, nil
}

// StartJava starts the Java driver against the cluster, its reports going
// into the groups truth like a Go child's; Close terminates it. Java
// clients have no kgo hooks: nothing of theirs is in requests_client,
// produced or fetch_batches.
func (c *Cluster) StartJava(ctx context.Context, mode string, args any) (*Child, error) {
	d, err := FindJavaDriver()
	if err != nil {
		return nil, err
	}
	ch, err := d.Start(ctx, c.addrs, mode, args, c.groups.addLine)
	if err != nil {
		return nil, err
	}
	ch.c = c
	c.mu.Lock()
	c.children = append(c.children, ch)
	c.mu.Unlock()
	return ch, nil
}
