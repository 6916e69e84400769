package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMissingTopic: kwire live --publish and kwire aggregate --from a
// topic the cluster does not have (or a cluster nobody listens at) stop
// at start-up, before capturing or consuming, with an error naming the
// topic and the seed brokers and saying what to do; before, live captured
// and then failed with "context deadline exceeded", and aggregate waited
// in silence and exited 0.
func TestMissingTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "there"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	url := "kafka://" + brokers + "/nope"
	down := closedAddr(t)
	live := func(extra ...string) []string {
		// Port 1: nothing to capture, were the check to let it start.
		return append([]string{"live", "-i", "lo", "--port", "1", "--duration", "5s"}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // in stderr
	}{
		{"publish", live("--publish", url),
			[]string{`--publish: topic "nope" does not exist on the Kafka cluster at ` + brokers, "create it, or pass --publish-create-topic"}},
		{"publish/create refused", live("--publish", url, "--publish-create-topic"),
			[]string{`topic "nope" does not exist on the Kafka cluster at ` + brokers, "the brokers did not create it"}},
		{"publish/down", live("--publish", "kafka://"+down+"/nope"),
			[]string{`--publish: cannot reach the Kafka cluster at ` + down + ` (asking for topic "nope")`, "connection refused"}},
		{"aggregate", []string{"aggregate", "--from", url, "--duration", "5s"},
			[]string{`--from: topic "nope" does not exist on the Kafka cluster at ` + brokers, "check the name, or create it", "--publish-create-topic"}},
		{"aggregate/group", []string{"aggregate", "--from", url, "--group", "g", "--duration", "5s"},
			[]string{`--from: topic "nope" does not exist on the Kafka cluster at ` + brokers, "check the name, or create it"}},
		{"aggregate/down", []string{"aggregate", "--from", "kafka://" + down + "/nope", "--duration", "5s"},
			[]string{`--from: cannot reach the Kafka cluster at ` + down, "connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %.300s, want nothing (the check comes before the capture)", stdout.String())
			}
		})
	}
}

// TestPublishCreateTopic: with --publish-create-topic, brokers that
// auto-create topics create it at the start-up check.
func TestPublishCreateTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/made"
	f := &publishFlags{kafka: kafkaFlags{url: url}}
	if err := f.check(context.Background()); err == nil {
		t.Fatal("no --publish-create-topic: check passed on a missing topic")
	}
	f.create = true
	if err := f.check(context.Background()); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if n, err := topicPartitions(context.Background(), cl, "made", false); err != nil || n == 0 {
		t.Fatalf("topic made: %d partitions, %v; want it created", n, err)
	}
}

// closedAddr returns a loopback address nothing listens at.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestLegalTopic: legalTopic agrees with the regexp it replaced.
func TestLegalTopic(t *testing.T) {
	re := regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)
	for _, s := range []string{"", "kwire", "kwire.g", "a.b_c-D9", "..", strings.Repeat("x", 249), strings.Repeat("x", 250),
		"a/b", "a b", "ä", "kwire\n", "a\x00", "a+b", "A:B"} {
		if got, want := legalTopic(s), re.MatchString(s); got != want {
			t.Errorf("legalTopic(%q) = %v, want %v", s, got, want)
		}
	}
}
