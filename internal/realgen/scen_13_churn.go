package realgen

import (
	"context"
	"fmt"
	"time"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_churn",
		Doc: "field report 2's client.id churn: a Java application makes a new KafkaProducer for every message and a new " +
			"KafkaConsumer (no group: assign and seek) to read it back, 15 requests, each client with Kafka's generated " +
			"client.id (producer-1.., and consumer-null-1.. for a consumer without group.id): 30 new client ids from one host within seconds. It starts more " +
			"than a minute (kwire's churn window) after the cluster's own first clients (topic creation), so the new " +
			"ids of that minute are the application's alone",
		Topics: map[string]int{churnTopic: 1},
		Config: quietReplicas,
		Run:    runChurn,
		Truth:  churnTruth,
	})
}

const (
	churnTopic    = "rk-churn"
	churnRequests = 15
	// churnQuiet is the wait before the application starts: above
	// kwire's churn window (correlate.HazardOptions.ChurnWindow, 60 s).
	churnQuiet = 65 * time.Second
)

// ChurnTruth is the clients an application made one after another.
type ChurnTruth struct {
	// ClientIDs are the client ids the clients used, in order of creation
	// (the driver's client reports).
	ClientIDs []string `json:"client_ids"`
	// First and Last are the times of the first and last client report
	// (Unix nanoseconds).
	First int64 `json:"first_ns"`
	Last  int64 `json:"last_ns"`
}

func runChurn(ctx context.Context, e *Env) error {
	e.Logf("waiting %v: no new client id for a churn window before the application starts", churnQuiet)
	select {
	case <-time.After(churnQuiet):
	case <-ctx.Done():
		return ctx.Err()
	}
	return e.RunJava(ctx, gen.JavaChurn, map[string]any{"topic": churnTopic, "requests": churnRequests, "acks": "all"})
}

func churnTruth(_ context.Context, e *Env, t *Truth) error {
	ct := &ChurnTruth{}
	for _, r := range e.Reports() {
		if r.Kind != "client" {
			continue
		}
		if ct.First == 0 {
			ct.First = r.Ns
		}
		ct.Last = r.Ns
		ct.ClientIDs = append(ct.ClientIDs, r.ClientID)
	}
	if len(ct.ClientIDs) != 2*churnRequests {
		return fmt.Errorf("the application made %d clients, want %d", len(ct.ClientIDs), 2*churnRequests)
	}
	t.Churn = ct
	return nil
}
