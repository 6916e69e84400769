package wire

import "github.com/twmb/franz-go/pkg/kmsg"

// Item adds it, an item of a decoded batch, at its At. A Fetch response
// decoded with Options.DeferRecords and not expanded keeps its record
// segments as they were read: nothing is rebuilt to be encoded again (a
// router re-encodes every item it reads; rebuilding, a segment claiming
// --max-frame bytes cost it that much memory and the time to zero it).
func (e *Encoder) Item(it *Item) {
	switch it.Kind {
	case KindExchange:
		if len(it.records) > 0 {
			if e.w.segs == nil {
				e.w.segs = map[*kmsg.FetchResponseTopicPartition][]byte{}
			}
			for _, ps := range it.records {
				e.w.segs[ps.p] = ps.enc
			}
			defer clear(e.w.segs)
		}
		e.Exchange(it.At, it.Exchange)
	case KindAnomaly:
		e.Anomaly(it.At, it.Anomaly)
	case KindCounters:
		e.Counters(it.At, it.Counters)
	}
}
