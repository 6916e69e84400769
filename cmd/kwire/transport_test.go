package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestTransportAuthErrors: against a SASL kfake cluster, a wrong password
// on --publish or --from is reported as an authentication failure, at
// once (before, "cannot reach the Kafka cluster ... no answer within
// 10s"); PLAIN without TLS is warned about; a kafka://user:pass@host URL
// is refused without its credentials ever being echoed.
func TestTransportAuthErrors(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "alice", "right-pw"), kfake.Superuser("SCRAM-SHA-256", "bob", "right-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	url := "kafka://" + brokers + "/t"

	// The cluster takes the right password: what fails below is the
	// password, not the set-up.
	for _, k := range []kafkaFlags{
		{url: url, mechanism: "PLAIN", user: "alice", envPass: "KWIRE_TEST_PASSWORD"},
		{url: url, mechanism: "SCRAM-SHA-256", user: "bob", envPass: "KWIRE_TEST_PASSWORD"},
	} {
		t.Setenv("KWIRE_TEST_PASSWORD", "right-pw")
		opts, topic, err := k.options()
		if err != nil {
			t.Fatal(err)
		}
		if err := k.checkTopic(context.Background(), opts, topic, false); err != nil {
			t.Fatalf("%s with the right password: %v", k.mechanism, err)
		}
	}

	t.Setenv("KWIRE_PUBLISH_PASSWORD", "wrong-pw")
	t.Setenv("KWIRE_AGGREGATE_PASSWORD", "wrong-pw")
	live := func(extra ...string) []string {
		return append([]string{"live", "-i", "lo", "--port", "1", "--duration", "5s"}, extra...)
	}
	const secret = "s3cret-pw"
	for _, tc := range []struct {
		name   string
		args   []string
		want   []string // in stderr
		unwant []string
	}{
		{"aggregate/plain", []string{"aggregate", "--from", url, "--sasl-mechanism", "PLAIN", "--user", "alice", "--duration", "5s"},
			[]string{`--from: authentication failed at the Kafka cluster at ` + brokers + ` as user "alice" (SASL PLAIN)`, "check --user, the password (--password-file or $KWIRE_AGGREGATE_PASSWORD)",
				"warning: SASL PLAIN without --tls sends the password in the clear to " + brokers},
			[]string{"cannot reach", "wrong-pw"}},
		{"aggregate/scram", []string{"aggregate", "--from", url, "--sasl-mechanism", "SCRAM-SHA-256", "--user", "bob", "--duration", "5s"},
			[]string{`--from: authentication failed at the Kafka cluster at ` + brokers + ` as user "bob" (SASL SCRAM-SHA-256)`},
			[]string{"cannot reach", "warning", "wrong-pw"}},
		{"publish/plain", live("--publish", url, "--publish-sasl-mechanism", "plain", "--publish-user", "alice"),
			[]string{`--publish: authentication failed at the Kafka cluster at ` + brokers + ` as user "alice" (SASL PLAIN)`, "$KWIRE_PUBLISH_PASSWORD",
				"warning: SASL PLAIN without --publish-tls"},
			[]string{"cannot reach", "wrong-pw"}},
		{"aggregate/userinfo", []string{"aggregate", "--from", "kafka://alice:" + secret + "@" + brokers + "/t", "--duration", "5s"},
			[]string{`--from: "kafka://REDACTED@` + brokers + `/t": the URL holds credentials`, "--user", "--password-file or $KWIRE_AGGREGATE_PASSWORD"},
			[]string{secret, "alice"}},
		{"publish/userinfo", live("--publish", "kafka://alice:"+secret+"@"+brokers+"/t"),
			[]string{`--publish: "kafka://REDACTED@` + brokers + `/t": the URL holds credentials`, "--publish-user"},
			[]string{secret, "alice"}},
		{"publish/userinfo/no scheme", live("--publish", "alice:"+secret+"@"+brokers+"/t"),
			[]string{`--publish: "REDACTED@` + brokers + `/t": want kafka://`},
			[]string{secret, "alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			start := time.Now()
			if code := run(tc.args, &stdout, &stderr); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if d := time.Since(start); d >= topicCheckTimeout {
				t.Errorf("took %v: the failure waited for the start-up check's timeout", d)
			}
			out := stdout.String() + stderr.String()
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			for _, w := range tc.unwant {
				if strings.Contains(out, w) {
					t.Errorf("output holds %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestRedactURL: credentials go, the rest of the URL stays.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"kafka://h:9092/t", "kafka://h:9092/t"},
		{"kafka://u:p@h:9092/t", "kafka://REDACTED@h:9092/t"},
		{"kafka://u:p@w@h:9092,h2:9092/t", "kafka://REDACTED@h:9092,h2:9092/t"},
		{"u:p@h:9092", "REDACTED@h:9092"},
		{"kafka://h/t@x", "kafka://h/t@x"},
	} {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
