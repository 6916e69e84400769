package realkafka

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Kafka lines the project pins (java/kafka/pom.xml, java/kafka-3/pom.xml).
const (
	// Version4 is the default line: Apache Kafka 4.4.0.
	Version4 = "4.4.0"
	// Version3 is the last 3.x line, in KRaft mode, for older wire
	// versions (no share groups, classic groups by default, transactions
	// v1).
	Version3 = "3.9.2"
)

// ErrMissing is returned (wrapped, with what is missing and the command
// that fixes it) when java or the Kafka jars are not there.
var ErrMissing = errors.New("real Kafka cannot start")

// LibDir is where `make realkafka-deps` puts the jars of Kafka version v:
// $KWIRE_KAFKA_CACHE/kafka-<v>/lib, by default under
// $HOME/.cache/kwire.
func LibDir(v string) string {
	base := os.Getenv("KWIRE_KAFKA_CACHE")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache", "kwire")
	}
	return filepath.Join(base, "kafka-"+v, "lib")
}

// repoFile returns the path of a file of the repository (java/kafka/...),
// found from this source file's place: tests run in their package
// directory and the generator anywhere.
func repoFile(rel string) string {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return rel
	}
	return filepath.Join(filepath.Dir(self), "..", "..", filepath.FromSlash(rel))
}

// javaBin finds java: $JAVA_HOME/bin/java, else java on PATH. Kafka 4.x
// brokers need Java 17 or newer.
func javaBin() (string, error) {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		p := filepath.Join(h, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: no java on PATH and no $JAVA_HOME/bin/java: install a JDK 17 or newer (apt-get install openjdk-17-jre-headless)", ErrMissing)
	}
	return p, nil
}

// checkLib says what is missing from dir for Kafka version v.
func checkLib(dir, v string) error {
	fix := "run `make realkafka-deps` (Maven and network to Maven Central needed once; ~/.m2 caches the downloads)"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%w: no Kafka %s jars in %s: %s", ErrMissing, v, dir, fix)
	}
	need := []string{"kafka_2.13-" + v + ".jar", "kafka-clients-" + v + ".jar", "kafka-server-" + v + ".jar"}
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name()] = true
	}
	var missing []string
	for _, n := range need {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s lacks %s: %s", ErrMissing, dir, strings.Join(missing, ", "), fix)
	}
	return nil
}

// logConfig returns the JVM flag that points version v's logging at the
// project's configuration: log4j2 for 4.x, reload4j (log4j 1.x) for 3.x.
func logConfig(v string) (string, error) {
	if strings.HasPrefix(v, "3.") {
		p := repoFile("java/kafka-3/log4j.properties")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrMissing, p, err)
		}
		return "-Dlog4j.configuration=file:" + p, nil
	}
	p := repoFile("java/kafka/log4j2.properties")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrMissing, p, err)
	}
	return "-Dlog4j2.configurationFile=" + p, nil
}
