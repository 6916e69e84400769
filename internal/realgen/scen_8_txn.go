package realgen

import (
	"context"
	"fmt"
	"maps"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_txn",
		Doc: "Java transactional producers (transactions v2, KIP-890) on one partition read by a read_committed classic " +
			"consumer rk-reader (group rk-txn-reader): rk-txn-ok commits two transactions and aborts a third (its records written); rk-txn-z-zombie " +
			"(transactional id rk-txn-zombie) begins a transaction and is fenced when rk-txn-z-successor initializes the same " +
			"id (the broker aborts the open transaction), its next send and commit are refused, and the successor commits; " +
			"rk-txn-hang begins a transaction, writes 3 records and is SIGKILLed: it hangs past its 15 s transaction timeout, " +
			"holding the last stable offset while the reader waits there and rk-txn-after's committed transaction waits " +
			"behind it, until the broker aborts it",
		Topics:       map[string]int{txnTopic: 1},
		Config:       txnConfig,
		Groups:       []string{txnGroup},
		Transactions: []string{txnOK, txnZombie, txnHang, txnAfter},
		Run:          runTxn,
	})
}

const (
	txnTopic  = "rk-txn"
	txnGroup  = "rk-txn-reader"
	txnOK     = "rk-txn-ok"
	txnZombie = "rk-txn-zombie"
	txnHang   = "rk-txn-hang"
	txnAfter  = "rk-txn-after"
	// txnTimeoutMs is every producer's transaction.timeout.ms: past the
	// 10 s kwire waits before it calls a last stable offset stuck.
	txnTimeoutMs = 15000
)

// txnConfig makes the coordinator look for timed-out transactions every
// 2 s (Kafka's default: 10 s), so it aborts the hanging one soon after
// its timeout.
var txnConfig = func() map[string]string {
	c := maps.Clone(quietReplicas)
	c["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "2000"
	return c
}()

// consumed says whether client reported n records of txnTopic or more:
// a read_committed consumer gets committed records only.
func consumed(rs []Report, client string, n int64) bool {
	for _, r := range rs {
		if r.Kind == "consumed" && r.ClientID == client && r.Topic == txnTopic {
			n -= r.Records
		}
	}
	return n <= 0
}

func txnArgs(client, id string, more map[string]any) map[string]any {
	a := map[string]any{"client_id": client, "transactional_id": id, "topic": txnTopic, "partition": 0,
		"size": 20, "txn_timeout_ms": txnTimeoutMs}
	maps.Copy(a, more)
	return a
}

func runTxn(ctx context.Context, e *Env) error {
	reader, err := e.StartReady(ctx, gen.JavaConsumer, map[string]any{"client_id": "rk-reader", "group": txnGroup,
		"topics": []string{txnTopic}, "isolation": "read_committed", "auto_offset_reset": "earliest"})
	if err != nil {
		return err
	}
	// 5 records committed twice, 5 aborted (flushed first, so the abort
	// has records and a marker).
	if err := e.RunJava(ctx, gen.JavaTxn, txnArgs(txnOK, txnOK, map[string]any{"transactions": 3, "records": 5, "abort_every": 3,
		"flush": true})); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-reader read rk-txn-ok's commits", func(rs []Report) bool { return consumed(rs, "rk-reader", 10) }); err != nil {
		return err
	}
	// The zombie's 3 records aborted by the successor's InitProducerID,
	// the successor's 3 committed.
	if err := e.RunJava(ctx, gen.JavaTxn, txnArgs("rk-txn-z", txnZombie, map[string]any{"how": "zombie", "records": 3})); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-reader read the successor's commit", func(rs []Report) bool { return consumed(rs, "rk-reader", 13) }); err != nil {
		return err
	}
	hang, err := e.StartReady(ctx, gen.JavaTxn, txnArgs(txnHang, txnHang, map[string]any{"how": "hang", "records": 3}))
	if err != nil {
		return err
	}
	// SIGKILL: a closed producer would abort its transaction.
	if err := hang.Kill(); err != nil {
		return err
	}
	e.Logf("rk-txn-hang SIGKILLed with its transaction open")
	if err := e.RunJava(ctx, gen.JavaTxn, txnArgs(txnAfter, txnAfter, map[string]any{"transactions": 1, "records": 5})); err != nil {
		return err
	}
	// rk-txn-after's 5 records wait behind the hanging transaction's 3.
	if err := e.WaitFor(ctx, "rk-reader read rk-txn-after's commit once the broker aborted the hanging transaction",
		func(rs []Report) bool { return consumed(rs, "rk-reader", 18) }); err != nil {
		return err
	}
	if err := e.RunJava(ctx, gen.JavaAdmin, map[string]any{"client_id": "rk-admin", "stop_on_error": true,
		"ops": []map[string]any{
			{"op": "describe_transactions", "transactional_ids": []string{txnOK, txnZombie, txnHang, txnAfter}},
			{"op": "list_transactions"},
		}}); err != nil {
		return err
	}
	if err := reader.Terminate(ctx); err != nil {
		return fmt.Errorf("close rk-reader: %w", err)
	}
	return nil
}
