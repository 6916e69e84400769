package realgen

import (
	"context"
	"fmt"
	"os"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_txnerr",
		Doc: "the error paths of Java transactional producers under transactions v2 (KIP-890) on one partition read by " +
			"a read_committed consumer: rk-txe-busy commits 8 transactions back to back, so the partition leader's " +
			"AddPartitionsToTxn for the next one meets the previous one's markers still being written " +
			"(CONCURRENT_TRANSACTIONS, retried by the leader); rk-txe-fenced-zombie's commit (EndTxn) comes after " +
			"rk-txe-fenced-successor's InitProducerID fenced it (PRODUCER_FENCED); rk-txe-late stalls past its 15 s " +
			"transaction timeout, the coordinator aborts (bumping the epoch), its next send is refused, it aborts " +
			"(the coordinator takes the abort of the epoch it bumped) and commits a new transaction",
		Topics:       map[string]int{txnTopic: 1},
		Config:       txnConfig,
		Groups:       []string{txnGroup},
		Transactions: []string{txeBusy, txeFenced, txeLate},
		Run:          runTxnErr,
	})
}

const (
	txeBusy   = "rk-txe-busy"
	txeFenced = "rk-txe-fenced"
	txeLate   = "rk-txe-late"
	// txeBusyN transactions back to back: each commit's markers race the
	// next transaction's first Produce.
	txeBusyN = 8
)

func runTxnErr(ctx context.Context, e *Env) error {
	reader, err := e.StartReady(ctx, gen.JavaConsumer, map[string]any{"client_id": "rk-reader", "group": txnGroup,
		"topics": []string{txnTopic}, "isolation": "read_committed", "auto_offset_reset": "earliest"})
	if err != nil {
		return err
	}
	if err := e.RunJava(ctx, gen.JavaTxn, txnArgs(txeBusy, txeBusy, map[string]any{"transactions": txeBusyN, "records": 3})); err != nil {
		return err
	}
	want := int64(3 * txeBusyN)
	if err := e.WaitFor(ctx, "rk-reader read rk-txe-busy's commits", func(rs []Report) bool { return consumed(rs, "rk-reader", want) }); err != nil {
		return err
	}
	if n, err := e.coordinatorErrors(txeBusy, "AddPartitionsToTxn:CONCURRENT_TRANSACTIONS"); err != nil || n == 0 {
		return fmt.Errorf("no coordinator answered rk-txe-busy's partition leader CONCURRENT_TRANSACTIONS (the "+
			"markers won every race; run again): %v", err)
	}
	// The zombie's 3 records are aborted by the successor's
	// InitProducerID, its commit refused; the successor's 3 committed.
	if err := e.RunJava(ctx, gen.JavaTxn, txnArgs("rk-txe-fenced", txeFenced, map[string]any{"how": "zombie", "records": 3,
		"zombie_send": false})); err != nil {
		return err
	}
	want += 3
	if err := e.WaitFor(ctx, "rk-reader read the successor's commit", func(rs []Report) bool { return consumed(rs, "rk-reader", want) }); err != nil {
		return err
	}
	// 3 records aborted by the coordinator on timeout, a refused send,
	// the client's abort, then 3 records committed.
	if err := e.RunJava(ctx, gen.JavaTxn, txnArgs(txeLate, txeLate, map[string]any{"how": "timeout", "records": 3})); err != nil {
		return err
	}
	want += 3
	if err := e.WaitFor(ctx, "rk-reader read rk-txe-late's commit", func(rs []Report) bool { return consumed(rs, "rk-reader", want) }); err != nil {
		return err
	}
	if err := e.RunJava(ctx, gen.JavaAdmin, map[string]any{"client_id": "rk-admin", "stop_on_error": true,
		"ops": []map[string]any{{"op": "describe_transactions", "transactional_ids": []string{txeBusy, txeFenced, txeLate}}}}); err != nil {
		return err
	}
	if err := reader.Terminate(ctx); err != nil {
		return fmt.Errorf("close rk-reader: %w", err)
	}
	return nil
}

// coordinatorErrors counts the transaction coordinators' log lines of
// error (txnErrorREs: "API:ERROR") for transactional id so far.
func (e *Env) coordinatorErrors(id, apiErr string) (int, error) {
	n := 0
	for _, node := range e.C.Nodes() {
		b, err := os.ReadFile(e.C.LogFile(node))
		if err != nil {
			return 0, err
		}
		n += txnLogErrors(b)[id][apiErr]
	}
	return n, nil
}
