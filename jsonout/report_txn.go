package jsonout

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kwire/kwire/correlate"
)

// txnReport is the text report's transactions: per transactional id its
// producer and how its transactions ended, then per transactional
// partition its last stable offset against its high watermark.
func txnReport(b *strings.Builder, s *correlate.Snapshot) {
	if len(s.Transactions) > 0 {
		b.WriteString("\n== transactions\n")
		tw := tabwriter.NewWriter(b, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  transactional id\tclient\tproducer id\tepoch\tstate\tcommitted\taborted\ttimed out\tfenced\tmax took")
		for _, t := range s.Transactions {
			fmt.Fprintf(tw, "  %s\t%s@%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%dms\n", t.TransactionalID, t.ClientID, t.ClientHost,
				t.ProducerID, t.ProducerEpoch, TxnState(&t, s.Time.Time), t.Committed, t.Aborted, t.TimedOut, t.Fenced, t.MaxDurationMillis)
		}
		tw.Flush()
	}
	if len(s.StablePartitions) > 0 {
		b.WriteString("transactional partitions (last stable offset vs high watermark):\n")
		tw := tabwriter.NewWriter(b, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "topic\tpart\tlast stable\thigh wm\tunstable\tstuck\tmax stuck\tmarkers\taborted txns\theld by\t")
		for _, p := range s.StablePartitions {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%dms\t%d\t%d\t%s\t\n", p.Topic, p.Partition, p.LastStable, p.HighWatermark,
				p.Unstable, stuckText(p.StuckMillis, p.StuckSince), p.MaxStuckMillis, p.TransactionMarkers, p.AbortedTransactions, orDash(p.HeldBy))
		}
		tw.Flush()
	}
}

// TxnState is a transactional id's state for people at time now: "open
// 3.2s" with the open transaction's age, or "idle".
func TxnState(t *correlate.Transaction, now time.Time) string {
	if t.OpenSince == nil {
		return "idle"
	}
	return "open " + now.Sub(t.OpenSince.Time).Round(time.Millisecond).String()
}

func stuckText(ms int64, since *correlate.Time) string {
	if since == nil {
		return "-"
	}
	return fmt.Sprintf("%dms", ms)
}
