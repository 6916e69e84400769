package realgen

import "github.com/kwire/kwire/internal/realkafka"

func init() {
	register(Scenario{
		Name: "r3_joins",
		Doc: "r_joins on the older line: a Kafka 3.9.2 cluster (KRaft) and the 3.9.2 Java clients, so the capture holds their " +
			"request versions (JoinGroup, SyncGroup, OffsetCommit, Fetch...); classic consumers (range) join group rk3-joins one by one " +
			"under the default 3 s initial rebalance delay, one leaves (LeaveGroup), one is SIGKILLed and expires after its 10 s session " +
			"timeout; the last closes. The topic is created by the 4.4 Admin client",
		Kafka:  realkafka.Version3,
		Topics: map[string]int{"rk3-joins": 3},
		Config: quietReplicas,
		Groups: []string{"rk3-joins"},
		Run:    joins{group: "rk3-joins", client: "rk3-c"}.run,
	})
}
