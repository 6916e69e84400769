package gen

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactional producers dying around one that keeps committing (issue
// 31), and replays over a transactional input, whose markers take offsets
// and are never records.
func init() {
	for _, s := range []Scenario{hTxnKilled, hTxnReplayMarkers} {
		Register(s)
	}
}

// txnKill is one transactional producer of h_txn_killed to be SIGKILLed
// mid-transaction before (or inside) txk-steady's transaction before, and
// how long after the kill txk-steady begins it.
type txnKill struct {
	before int
	after  time.Duration
	// inside: txk-steady has begun its transaction and written one
	// record when the kill comes.
	inside bool
	// timeoutMillis is the victim's transaction timeout.
	timeoutMillis int
	// restart: a new instance of the victim's transactional id starts
	// after txk-steady's transaction and commits two transactions (its
	// InitProducerID makes the broker abort the dead one's).
	restart bool
}

var txnKills = []txnKill{
	{before: 4, after: 0, timeoutMillis: 3000},
	{before: 9, after: 200 * time.Millisecond, timeoutMillis: 20000, restart: true},
	{before: 14, after: 800 * time.Millisecond, timeoutMillis: 3000},
	{before: 17, inside: true, timeoutMillis: 3000},
}

var hTxnKilled = Scenario{
	Name: "h_txn_killed",
	Doc: "txk-steady (transactional id txk-steady-1, transaction version 2) commits 20 transactions of 3 records " +
		"(three Produce, one EndTxn each) to txk-orders (2 partitions) while four other transactional producers, " +
		"children txk-victim-1..4 (ids txk-victim-1..4), each begin a transaction, write 3 records and are " +
		"SIGKILLed: before txk-steady's 5th transaction (begun at once), its 10th (200ms after), its 15th (800ms " +
		"after) and inside its 18th. Right after txk-steady's 10th commit (a few hundred ms after the second kill) " +
		"txk-restart, a new instance of txk-victim-2 (20s timeout), commits two transactions (its InitProducerID makes the broker abort the dead instance's). The others' " +
		"transactions hang until the broker aborts them at their 3s timeout",
	Options: oneTopic("txk-orders", 2),
	Timeout: 60 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic = "txk-orders"
		steady, err := txnClient(c, "txk-steady", "txk-steady-1", topic, 10*time.Second)
		if err != nil {
			return err
		}
		defer steady.Close()
		var restarted []*kgo.Client
		defer func() {
			for _, cl := range restarted {
				cl.Close()
			}
		}()
		k := 0
		for i := range 20 {
			var kill *txnKill
			var victim *Child
			if k < len(txnKills) && txnKills[k].before == i {
				kill = &txnKills[k]
				k++
				id := fmt.Sprintf("txk-victim-%d", k)
				victim, err = c.startReady(ctx, "txn-producer", TxnProducerArgs{ClientID: id, TransactionalID: id, Topic: topic,
					TimeoutMillis: kill.timeoutMillis, Records: 3}, "txn-producer child "+id, "producing in its transaction")
				if err != nil {
					return err
				}
			}
			killNow := func() error {
				killed := time.Now()
				if err := victim.Kill(); err != nil {
					return err
				}
				_ = victim.Wait(ctx)
				c.Note("h_txn_killed: txk-victim-%d SIGKILLed at txk-steady's transaction %d (inside it: %v)", k, i, kill.inside)
				if d := kill.after - time.Since(killed); d > 0 {
					sleepCtx(ctx, d)
				}
				return nil
			}
			if kill != nil && !kill.inside {
				if err := killNow(); err != nil {
					return err
				}
			}
			if err := steady.BeginTransaction(); err != nil {
				return fmt.Errorf("txk-steady begin %d: %w", i, err)
			}
			for j := range 3 {
				if err := steady.ProduceSync(ctx, &kgo.Record{Value: value(i*3+j, 60)}).FirstErr(); err != nil {
					return fmt.Errorf("txk-steady produce %d: %w", i, err)
				}
				if j == 0 && kill != nil && kill.inside {
					if err := killNow(); err != nil {
						return err
					}
				}
			}
			if err := steady.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return fmt.Errorf("txk-steady commit %d: %w", i, err)
			}
			if kill != nil && kill.restart {
				id := fmt.Sprintf("txk-victim-%d", k)
				r, err := txnClient(c, "txk-restart", id, topic, 10*time.Second)
				if err != nil {
					return err
				}
				restarted = append(restarted, r)
				for n := range 2 {
					if err := txnProduce(ctx, r, 1000+n*3, 3, true); err != nil {
						return fmt.Errorf("txk-restart transaction %d: %w", n, err)
					}
				}
			}
		}
		sleepCtx(ctx, 3500*time.Millisecond) // the hung transactions' timeouts run out
		for n, kill := range txnKills {
			id := fmt.Sprintf("txk-victim-%d", n+1)
			if kill.restart {
				continue // ended by the restart's InitProducerID
			}
			c.AddHazard(Hazard{Kind: "hanging_transaction", ClientID: id, TransactionalID: id,
				Numbers: map[string]int64{"transaction_timeout_ms": int64(kill.timeoutMillis)},
				Note:    "SIGKILLed mid-transaction: no EndTxn; kfake aborts it at its timeout"})
		}
		return c.RecordEndOffsets(ctx, topic)
	},
	Attempts: 2,
}

var hTxnReplayMarkers = Scenario{
	Name: "h_txn_replay_markers",
	Doc: "txm-producer (transactional id txm-src) writes two committed transactions of 3 records to txm-orders " +
		"(1 partition): data at offsets 0-2 and 4-6, commit markers at 3 and 7. txm-etl, one kgo client that is a " +
		"member of group txm-group (read_committed, no autocommit) and a transactional producer (id txm-etl-1), " +
		"reads the 6 records, commits offset 4 (past the first marker, as Java's position does), then in a " +
		"transaction commits the group's offset 8 (TxnOffsetCommit) and aborts it: the group stays at 4 and " +
		"offsets 4..7 come again, 3 records and a marker",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(1, "txm-orders", "txm-out")}},
	Timeout: 45 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, txn = "txm-orders", "txm-group", "txm-etl-1"
		p, err := txnClient(c, "txm-producer", "txm-src", topic, 10*time.Second)
		if err != nil {
			return err
		}
		for i := range 2 {
			if err := txnProduce(ctx, p, i*3, 3, true); err != nil {
				return fmt.Errorf("txm-producer transaction %d: %w", i, err)
			}
		}
		p.Close()
		args := GMemberArgs{ClientID: "txm-etl", Group: group, Topics: []string{topic}, Commit: "none",
			Extra: []kgo.Opt{readCommitted(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.TransactionalID(txn),
				kgo.TransactionTimeout(10 * time.Second), kgo.DefaultProduceTopic("txm-out"), kgo.ProducerLinger(0)}}
		cl, probe, err := c.probedClient(args)
		if err != nil {
			return err
		}
		var got []int64
		for len(got) < 6 {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, r := range fs.Records() {
				got = append(got, r.Offset)
			}
		}
		if fmt.Sprint(got) != "[0 1 2 4 5 6]" {
			return fmt.Errorf("txm-etl read offsets %v, want 0-2 and 4-6: %w", got, ErrRetry)
		}
		member, gen := cl.GroupMetadata()
		if code, err := c.rawCommit(ctx, cl, group, member, gen, topic, 0, 4); err != nil || code != 0 {
			return fmt.Errorf("commit 4: %v (code %d): %w", err, code, ErrRetry)
		}
		if err := abortedTxnOffsetCommit(ctx, cl, txn, group, member, gen, topic, 8); err != nil {
			return err
		}
		probe.closing.Store(true)
		cl.Close()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		if err := c.RecordEndOffsets(ctx, topic); err != nil {
			return err
		}
		c.AddHazard(Hazard{Kind: "txn_offsets_aborted", Group: group, Topic: topic, Partition: i32(0), ClientID: "txm-etl",
			TransactionalID: txn, Numbers: map[string]int64{"offset": 8, "committed": 4, "replayed": 3, "from": 4, "to": 7},
			Note: "TxnOffsetCommit of offset 8 accepted, then aborted: the group resumes at 4 and gets records 4, 5, 6 " +
				"again; offset 7 is txm-src's commit marker, not a record"})
		return nil
	},
}
