package gen

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// read_committed consumers (KIP-98) of transactional topics: what they
// wait for, what they skip, and what a group commits when transactions
// abort.
func init() {
	for _, s := range []Scenario{txnReadCommitted, hHangingLSO, hTxnOffsetsAborted} {
		Register(s)
	}
}

// readCommitted are a kgo read_committed consumer's options.
func readCommitted() kgo.Opt { return kgo.FetchIsolationLevel(kgo.ReadCommitted()) }

// dataRecords counts the records of rs that are not control records
// (transaction markers, returned by kgo.KeepControlRecords).
func dataRecords(rs []*kgo.Record) int64 {
	var n int64
	for _, r := range rs {
		if !r.Attrs.IsControl() {
			n++
		}
	}
	return n
}

// waitCount waits until *n reaches want.
func waitCount(ctx context.Context, n *atomic.Int64, want int64, what string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for n.Load() < want {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %d of %d records: %w", what, n.Load(), want, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

var txnReadCommitted = Scenario{
	Name: "txn_read_committed",
	Doc: "correct read_committed consumer groups on a transactional topic: txrc-producer (transactional id " +
		"txrc-1) writes six transactions of 4 records to txrc-in (2 partitions), the second and fifth aborted, " +
		"while two groups consume it read_committed and commit after every poll: txrc-a (kgo's default: the " +
		"last data record + 1) and txrc-b (kgo.KeepControlRecords: past the transaction markers, as the Java " +
		"consumer's position does, so commits land on marker + 1): nothing above info is a hazard",
	Options: oneTopic("txrc-in", 2),
	Timeout: 60 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic = "txrc-in"
		var got [2]atomic.Int64
		var members []*gMember
		for i, g := range []string{"txrc-a", "txrc-b"} {
			extra := []kgo.Opt{readCommitted(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
			if i == 1 {
				extra = append(extra, kgo.KeepControlRecords())
			}
			n := &got[i]
			m, err := startGMember(ctx, c, GMemberArgs{ClientID: g + "-member", Group: g, Topics: []string{topic},
				Extra: extra, OnRecords: func(rs []*kgo.Record) { n.Add(dataRecords(rs)) }})
			if err != nil {
				return err
			}
			members = append(members, m)
			if err := m.waitAssigned(ctx); err != nil {
				return err
			}
		}
		p, err := txnClient(c, "txrc-producer", "txrc-1", topic, 10*time.Second)
		if err != nil {
			return err
		}
		committed := int64(0)
		for i := range 6 {
			commit := i != 1 && i != 4
			if err := txnProduce(ctx, p, i*4, 4, commit); err != nil {
				return fmt.Errorf("txrc-producer transaction %d: %w", i, err)
			}
			if commit {
				committed += 4
			}
			sleepCtx(ctx, 300*time.Millisecond) // the groups poll and commit between transactions
		}
		p.Close()
		for i, m := range members {
			if err := waitCount(ctx, &got[i], committed, m.args.Group); err != nil {
				return err
			}
		}
		sleepCtx(ctx, 500*time.Millisecond) // the last commits
		for _, m := range members {
			m.leave()
		}
		c.Note("txn_read_committed: each group got the %d committed records; the 8 aborted were not delivered", committed)
		if err := c.RecordGroups(ctx, "txrc-a", "txrc-b"); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hHangingLSO = Scenario{
	Name: "h_hanging_lso",
	Doc: "txl-member (group txl-group, read_committed, commits after every poll) reads txl-orders (1 partition); " +
		"txl-plain writes 5 records, then txl-producer, a child process with transactional id txl-1 (20s " +
		"transaction timeout), begins a transaction, writes 5 records and is SIGKILLed: no EndTxn. txl-plain " +
		"writes 5 more: the high watermark moves to 15, the last stable offset stays at 5, and txl-member " +
		"waits there, fetching, until the broker aborts the transaction at its timeout",
	Options: oneTopic("txl-orders", 1),
	Timeout: 75 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, txn = "txl-orders", "txl-1"
		var got atomic.Int64
		m, err := startGMember(ctx, c, GMemberArgs{ClientID: "txl-member", Group: "txl-group", Topics: []string{topic},
			Extra:     []kgo.Opt{readCommitted(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
			OnRecords: func(rs []*kgo.Record) { got.Add(dataRecords(rs)) }})
		if err != nil {
			return err
		}
		if err := m.waitAssigned(ctx); err != nil {
			return err
		}
		if err := produceN(ctx, c, "txl-plain", topic, 0, 5); err != nil {
			return err
		}
		if err := waitCount(ctx, &got, 5, "txl-member"); err != nil {
			return err
		}
		ch, err := c.startReady(ctx, "txn-producer", TxnProducerArgs{ClientID: "txl-producer", TransactionalID: txn,
			Topic: topic, TimeoutMillis: 20000, Records: 5}, "txn-producer child", "producing in its transaction")
		if err != nil {
			return err
		}
		if err := ch.Kill(); err != nil {
			return err
		}
		_ = ch.Wait(ctx)
		killed := time.Now()
		if err := produceN(ctx, c, "txl-plain", topic, 100, 5); err != nil {
			return err
		}
		if err := waitCount(ctx, &got, 10, "txl-member"); err != nil {
			return err
		}
		waited := time.Since(killed)
		sleepCtx(ctx, 500*time.Millisecond) // its commit of them
		m.leave()
		c.Note("h_hanging_lso: txl-member (read_committed) got the 5 records written after the kill %v after it", waited.Round(time.Millisecond))
		if waited < 12*time.Second {
			return fmt.Errorf("txl-member waited only %v at the last stable offset: %w", waited, ErrRetry)
		}
		if err := c.RecordGroups(ctx, "txl-group"); err != nil {
			return err
		}
		if err := c.RecordEndOffsets(ctx, topic); err != nil {
			return err
		}
		c.AddHazard(Hazard{Kind: "hanging_transaction", ClientID: "txl-producer", TransactionalID: txn,
			Numbers: map[string]int64{"transaction_timeout_ms": 20000},
			Note:    "SIGKILLed mid-transaction: no EndTxn; kfake aborted it at the 20s timeout"})
		c.AddHazard(Hazard{Kind: "hanging_transaction", Topic: topic, Partition: i32(0), ClientID: "txl-producer",
			TransactionalID: txn, Numbers: map[string]int64{"last_stable_offset": 5, "high_watermark": 15},
			Note: fmt.Sprintf("txl-member fetched read_committed at the last stable offset 5 below the high watermark 15 for %v",
				waited.Round(time.Second))})
		return nil
	},
	Attempts: 2,
}

var hTxnOffsetsAborted = Scenario{
	Name: "h_txn_offsets_aborted",
	Doc: "txa-etl, one kgo client that is both a member of group txa-group (read_committed, no autocommit) and a " +
		"transactional producer (transactional id txa-1), reads the 10 records of txa-orders (1 partition), " +
		"commits offset 3 (OffsetCommit), then in a transaction writes a record to txa-out and commits the " +
		"group's offset 10 inside it (a TxnOffsetCommit built with kmsg, sent by the client, as Java's " +
		"sendOffsetsToTransaction does) and aborts it (EndTxn commit=false): the group's committed offset " +
		"stays 3, and records 3..9 will be processed again",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(1, "txa-orders", "txa-out")}},
	Timeout: 45 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, txn = "txa-orders", "txa-group", "txa-1"
		if err := produceN(ctx, c, "txa-plain", topic, 0, 10); err != nil {
			return err
		}
		args := GMemberArgs{ClientID: "txa-etl", Group: group, Topics: []string{topic}, Commit: "none",
			Extra: []kgo.Opt{readCommitted(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.TransactionalID(txn),
				kgo.TransactionTimeout(10 * time.Second), kgo.DefaultProduceTopic("txa-out"), kgo.ProducerLinger(0)}}
		cl, probe, err := c.probedClient(args)
		if err != nil {
			return err
		}
		if err := pollN(ctx, cl, 10); err != nil {
			return err
		}
		var commitErr error
		cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: 3}}},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if commitErr = err; err == nil && resp != nil {
					for _, t := range resp.Topics {
						for _, p := range t.Partitions {
							if p.ErrorCode != 0 {
								commitErr = fmt.Errorf("answered %s", errName(p.ErrorCode))
							}
						}
					}
				}
			})
		if commitErr != nil {
			return fmt.Errorf("commit 3: %w", commitErr)
		}
		member, gen := cl.GroupMetadata()
		if err := abortedTxnOffsetCommit(ctx, cl, txn, group, member, gen, topic, 10); err != nil {
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
		c.AddHazard(Hazard{Kind: "txn_offsets_aborted", Group: group, Topic: topic, Partition: i32(0), ClientID: "txa-etl",
			TransactionalID: txn, Numbers: map[string]int64{"offset": 10, "committed": 3},
			Note: "TxnOffsetCommit of offset 10 accepted, then EndTxn aborted the transaction: the group stays at 3"})
		return nil
	},
}

// txnCommitOffset sends, through cl (a transactional kgo client inside a
// transaction), a TxnOffsetCommit of offset for topic[partition] on behalf
// of group's member in generation gen, and returns the broker's code.
// abortedTxnOffsetCommit runs one transaction of cl that writes a record
// and commits offset of topic's partition 0 for group's member (its
// TxnOffsetCommit accepted), then aborts: the commit never takes effect.
func abortedTxnOffsetCommit(ctx context.Context, cl *kgo.Client, txn, group, member string, gen int32, topic string, offset int64) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value(0, 60)}).FirstErr(); err != nil {
		return err
	}
	code, err := txnCommitOffset(ctx, cl, txn, group, member, gen, topic, 0, offset)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("TxnOffsetCommit of offset %d answered %s: %w", offset, errName(code), ErrRetry)
	}
	return cl.EndTransaction(ctx, kgo.TryAbort)
}

func txnCommitOffset(ctx context.Context, cl *kgo.Client, txn, group, member string, gen int32, topic string, partition int32, offset int64) (int16, error) {
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txn, group, id, epoch
	req.MemberID, req.Generation = member, gen
	// TxnOffsetCommit v6+ names topics by id (KIP-516).
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		return 0, fmt.Errorf("metadata for %s: %v", topic, err)
	}
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, mresp.Topics[0].TopicID
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("TxnOffsetCommit: %w", err)
	}
	var code int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if code == 0 {
				code = p.ErrorCode
			}
		}
	}
	return code, nil
}
