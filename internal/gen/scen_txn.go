package gen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Transactional producers (KIP-98) against kfake. kgo uses transaction
// version 2 (KIP-890 part 2) when kfake advertises it: no
// AddPartitionsToTxn or AddOffsetsToTxn, and EndTxn bumps the epoch; a
// client capped at Kafka 3.7's versions uses the older requests.
func init() {
	for _, s := range []Scenario{txnClean, hZombieProducer, hHangingTransaction, hTxnOffsetCommitRejected} {
		Register(s)
	}
	RegisterChild("txn-producer", childTxnProducer)
}

// txnClient returns a transactional kgo client of c.
func txnClient(c *Cluster, clientID, txnID, topic string, timeout time.Duration, more ...kgo.Opt) (*kgo.Client, error) {
	return c.Kgo(append([]kgo.Opt{kgo.ClientID(clientID), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(timeout), kgo.ProducerLinger(0)}, more...)...)
}

// txnProduce runs one transaction of n records and commits (or aborts) it.
func txnProduce(ctx context.Context, cl *kgo.Client, from, n int, commit bool) error {
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for i := from; i < from+n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value(i, 60)}).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

var txnClean = Scenario{
	Name: "txn_clean",
	Doc: "correct transactional clients: txc-producer (transactional id txc-producer-1, 10s timeout, transaction " +
		"version 2) writes four transactions of 10 records to txc-in (2 partitions), the third aborted; then " +
		"txc-etl, a kgo GroupTransactSession capped at Kafka 3.7's versions (AddPartitionsToTxn, AddOffsetsToTxn, " +
		"TxnOffsetCommit v3), consumes txc-in read_committed in group txc-etl and copies each record to txc-out " +
		"in transactions that commit the group's offsets: nothing above info is a hazard",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(2, "txc-in", "txc-out")}},
	Timeout: 45 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		p, err := txnClient(c, "txc-producer", "txc-producer-1", "txc-in", 10*time.Second)
		if err != nil {
			return err
		}
		for i := range 4 {
			if err := txnProduce(ctx, p, i*10, 10, i != 2); err != nil {
				return fmt.Errorf("txc-producer transaction %d: %w", i, err)
			}
		}
		p.Close()
		// The group's generations go to the truth through the house's
		// member probe (Commit "none": the session commits, not the probe).
		args := GMemberArgs{ClientID: "txc-etl", Group: "txc-etl", Topics: []string{"txc-in"}, Commit: "none",
			Extra: []kgo.Opt{kgo.TransactionalID("txc-etl-1"), kgo.TransactionTimeout(10 * time.Second),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.DefaultProduceTopic("txc-out"), kgo.MaxVersions(kversion.V3_7_0()), kgo.ProducerLinger(0)}}
		probe := newProbe(args.Group, args.ClientID, "", c.groups.add)
		member, err := args.opts(probe)
		if err != nil {
			return err
		}
		opts := append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), c.Hooks()}, c.opts.ClientOpts...)
		s, err := kgo.NewGroupTransactSession(append(opts, member...)...)
		if err != nil {
			return err
		}
		probe.cl.Store(s.Client())
		defer s.Close()
		copied := 0
		for copied < 30 {
			fs := s.PollFetches(ctx)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := fs.Err0(); err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("txc-etl poll: %w", err)
			}
			recs := fs.Records()
			if len(recs) == 0 {
				continue
			}
			if err := s.Begin(); err != nil {
				return err
			}
			for _, r := range recs {
				if err := s.ProduceSync(ctx, &kgo.Record{Value: r.Value}).FirstErr(); err != nil {
					return fmt.Errorf("txc-etl produce: %w", err)
				}
			}
			committed, err := s.End(ctx, kgo.TryCommit)
			if err != nil {
				return fmt.Errorf("txc-etl end: %w", err)
			}
			if committed {
				copied += len(recs)
			}
		}
		c.Note("txn_clean: txc-etl copied %d committed records (the aborted transaction's 10 were not delivered read_committed)", copied)
		s.Close()
		if err := c.RecordGroups(ctx, "txc-etl"); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, "txc-in")
	},
	Attempts: 2,
}

var hZombieProducer = Scenario{
	Name: "h_zombie_producer",
	Doc: "two instances of transactional id txz-1 (10s timeout) on txz-orders (2 partitions): txz-producer-a " +
		"commits a transaction; txz-producer-b starts with the same transactional id (its InitProducerID bumps " +
		"the epoch, fencing a) and commits one; a, unaware, begins another and produces: the broker refuses it " +
		"(its answers on the tap name the errors); b commits once more",
	Options: oneTopic("txz-orders", 2),
	Timeout: 45 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, txn = "txz-orders", "txz-1"
		a, err := txnClient(c, "txz-producer-a", txn, topic, 10*time.Second, kgo.RecordRetries(2))
		if err != nil {
			return err
		}
		if err := txnProduce(ctx, a, 0, 5, true); err != nil {
			return fmt.Errorf("a: %w", err)
		}
		b, err := txnClient(c, "txz-producer-b", txn, topic, 10*time.Second)
		if err != nil {
			return err
		}
		fencedAt := time.Now()
		if err := txnProduce(ctx, b, 5, 5, true); err != nil {
			return fmt.Errorf("b: %w", err)
		}
		if err := txnProduce(ctx, a, 10, 5, true); err == nil {
			return fmt.Errorf("a's transaction after b took over was accepted: %w", ErrRetry)
		} else {
			c.Note("h_zombie_producer: txz-producer-a after txz-producer-b's InitProducerID: %v", err)
		}
		a.Close()
		if err := txnProduce(ctx, b, 15, 5, true); err != nil {
			return fmt.Errorf("b after a was fenced: %w", err)
		}
		b.Close()
		return c.zombieTxnTruth(txn, "txz-producer-a", fencedAt)
	},
}

// zombieTxnTruth adds a zombie_producer hazard for the first request of
// client (an instance of transactional id txn) that the broker answered
// PRODUCER_FENCED or INVALID_PRODUCER_EPOCH after since, as the tap saw it.
func (c *Cluster) zombieTxnTruth(txn, client string, since time.Time) error {
	for _, x := range c.tapExchanges(int16(kmsg.Produce), int16(kmsg.AddPartitionsToTxn), int16(kmsg.AddOffsetsToTxn),
		int16(kmsg.TxnOffsetCommit), int16(kmsg.EndTxn)) {
		if x.ClientID != client || x.ReqTime.Before(since) || x.Resp == nil {
			continue
		}
		code := fenceCodeOf(x.Resp)
		if code != 47 && code != 90 {
			continue
		}
		c.AddHazard(Hazard{Kind: "zombie_producer", ClientID: client, TransactionalID: txn,
			Numbers: map[string]int64{"error_code": int64(code)},
			Note:    fmt.Sprintf("the fenced instance's %s was answered %s by the broker", kmsg.NameForKey(x.Req.Key()), errName(code))})
		return nil
	}
	return fmt.Errorf("no request of %s answered PRODUCER_FENCED or INVALID_PRODUCER_EPOCH on the tap: %w", client, ErrRetry)
}

// fenceCodeOf returns a response's first error code that fences a producer.
func fenceCodeOf(r kmsg.Response) int16 {
	var codes []int16
	switch r := r.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	case *kmsg.AddPartitionsToTxnResponse:
		codes = append(codes, r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	case *kmsg.AddOffsetsToTxnResponse:
		codes = append(codes, r.ErrorCode)
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	case *kmsg.EndTxnResponse:
		codes = append(codes, r.ErrorCode)
	}
	for _, c := range codes {
		if c == 47 || c == 90 {
			return c
		}
	}
	return 0
}

// TxnProducerArgs are the arguments of the txn-producer child.
type TxnProducerArgs struct {
	ClientID, TransactionalID, Topic string
	TimeoutMillis                    int
	Records                          int
}

// childTxnProducer begins a transaction, produces Records records in it,
// reports ready and waits (to be killed mid-transaction).
func childTxnProducer(ctx context.Context, env *ChildEnv) error {
	var a TxnProducerArgs
	if err := json.Unmarshal(env.Args, &a); err != nil {
		return err
	}
	cl, err := env.Kgo(kgo.ClientID(a.ClientID), kgo.TransactionalID(a.TransactionalID), kgo.DefaultProduceTopic(a.Topic),
		kgo.TransactionTimeout(time.Duration(a.TimeoutMillis)*time.Millisecond), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for i := range a.Records {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value(i, 60)}).FirstErr(); err != nil {
			return err
		}
	}
	env.Ready()
	<-ctx.Done()
	return nil
}

var hHangingTransaction = Scenario{
	Name: "h_hanging_transaction",
	Doc: "txh-producer, a child process with transactional id txh-1 (3s transaction timeout), begins a " +
		"transaction, writes 10 records to txh-orders (2 partitions) and is SIGKILLed: no EndTxn. txh-plain " +
		"writes 10 records outside any transaction; txh-reader, a read_committed consumer, gets them only once " +
		"the broker has aborted the hung transaction at its timeout",
	Options: oneTopic("txh-orders", 2),
	Timeout: 45 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, txn = "txh-orders", "txh-1"
		ch, err := c.startReady(ctx, "txn-producer", TxnProducerArgs{ClientID: "txh-producer", TransactionalID: txn,
			Topic: topic, TimeoutMillis: 3000, Records: 10}, "txn-producer child", "producing in its transaction")
		if err != nil {
			return err
		}
		if err := ch.Kill(); err != nil {
			return err
		}
		_ = ch.Wait(ctx)
		killed := time.Now()
		if err := produceN(ctx, c, "txh-plain", topic, 100, 10); err != nil {
			return err
		}
		r, err := c.Kgo(kgo.ClientID("txh-reader"), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return err
		}
		got := 0
		for got < 10 {
			fs := r.PollFetches(ctx)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			got += len(fs.Records())
		}
		waited := time.Since(killed)
		r.Close()
		c.Note("h_hanging_transaction: txh-reader (read_committed) got the 10 plain records %v after the kill", waited.Round(time.Millisecond))
		c.AddHazard(Hazard{Kind: "hanging_transaction", ClientID: "txh-producer", TransactionalID: txn,
			Numbers: map[string]int64{"transaction_timeout_ms": 3000},
			Note:    "SIGKILLed mid-transaction: no EndTxn; kfake aborted it at the 3s timeout"})
		return nil
	},
}

var hTxnOffsetCommitRejected = Scenario{
	Name: "h_txn_offset_commit_rejected",
	Doc: "txr-member (kgo, group txr-group, no autocommit) consumes 10 records of txr-orders (2 partitions); " +
		"txr-producer (transactional id txr-1) begins a transaction, writes to txr-out and commits txr-group's " +
		"offset for txr-orders[0] inside it with the member's id and the generation before its current one, as a " +
		"producer that missed a rebalance would (a TxnOffsetCommit built with kmsg, sent by the kgo client): the " +
		"broker answers ILLEGAL_GENERATION, and the producer aborts",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(2, "txr-orders", "txr-out")}},
	Timeout: 45 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, txn = "txr-orders", "txr-group", "txr-1"
		if err := produceN(ctx, c, "txr-plain", topic, 0, 10); err != nil {
			return err
		}
		args := GMemberArgs{ClientID: "txr-member", Group: group, Topics: []string{topic}, Commit: "none",
			Extra: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}}
		m, _, err := c.probedClient(args)
		if err != nil {
			return err
		}
		if err := pollN(ctx, m, 10); err != nil {
			return err
		}
		member, gen := m.GroupMetadata()
		p, err := txnClient(c, "txr-producer", txn, "txr-out", 10*time.Second)
		if err != nil {
			return err
		}
		if err := p.BeginTransaction(); err != nil {
			return err
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Value: value(0, 60)}).FirstErr(); err != nil {
			return err
		}
		id, epoch, err := p.ProducerID(ctx)
		if err != nil {
			return err
		}
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txn, group, id, epoch
		req.MemberID, req.Generation = member, gen-1
		// TxnOffsetCommit v6+ names topics by id (KIP-516).
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mreq.Topics = append(mreq.Topics, mt)
		mresp, err := mreq.RequestWith(ctx, p)
		if err != nil || len(mresp.Topics) != 1 {
			return fmt.Errorf("metadata for %s: %v", topic, err)
		}
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, mresp.Topics[0].TopicID
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 5
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, p)
		if err != nil {
			return fmt.Errorf("TxnOffsetCommit: %w", err)
		}
		var code int16
		for _, t := range resp.Topics {
			for _, pt := range t.Partitions {
				code = pt.ErrorCode
			}
		}
		if code == 0 || code == 47 || code == 90 {
			return fmt.Errorf("TxnOffsetCommit with generation %d answered %d, not a generation error: %w", gen-1, code, ErrRetry)
		}
		if err := p.EndTransaction(ctx, kgo.TryAbort); err != nil {
			return err
		}
		p.Close()
		m.Close()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		if err := c.RecordEndOffsets(ctx, topic); err != nil {
			return err
		}
		c.AddHazard(Hazard{Kind: "txn_offset_commit_rejected", Group: group, Topic: topic, Partition: i32(0), ClientID: "txr-producer",
			TransactionalID: txn, Generation: i32(gen - 1), Numbers: map[string]int64{"error_code": int64(code), "offset": 5},
			Note: "TxnOffsetCommit with the generation before the member's current one, answered " + errName(code)})
		return nil
	},
}
