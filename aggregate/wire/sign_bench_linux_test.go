//go:build linux

package wire

import (
	"testing"
)

// BenchmarkVerifyCaptures is the aggregator's cost of verifying the
// agents' batches against decoding them: every committed capture encoded
// into batches of 64 KiB at most, as an agent does, each signed; an
// iteration verifies them all, then decodes them all (records deferred,
// as the aggregator does). Reported in CPU time of this process (the
// machine may be shared): per byte and per item, and verification as a
// share of decoding, which is itself a fraction of the aggregator's cost
// per item (the correlator takes most of it: docs/aggregate.md).
func BenchmarkVerifyCaptures(b *testing.B) {
	s := NewSigner(mustKeys(b, "h "+hexA)[0])
	kr := NewKeyring(mustKeys(b, "h "+hexA+"\nb2 "+hexB))
	var values [][]byte
	var size int64
	items := 0
	for _, f := range testCaptures(b) {
		for _, v := range runRoundTrip(b, f).values {
			if bt, err := Decode(v, nil); err == nil {
				items += len(bt.Items)
			}
			values = append(values, s.Sign(v))
			size += int64(len(v)) + TagSize
		}
	}
	var verify, decode int64
	b.SetBytes(size)
	for b.Loop() {
		c0 := cpuTime()
		for _, v := range values {
			if _, err := kr.Verify(v); err != nil {
				b.Fatal(err)
			}
		}
		c1 := cpuTime()
		for _, v := range values {
			if _, err := Decode(v, decodeOpts); err != nil {
				b.Fatal(err)
			}
		}
		c2 := cpuTime()
		verify += (c1 - c0).Nanoseconds()
		decode += (c2 - c1).Nanoseconds()
	}
	n := float64(b.N)
	b.ReportMetric(float64(verify)/n/float64(size), "verify-cpu-ns/B")
	b.ReportMetric(float64(verify)/n/float64(items), "verify-cpu-ns/item")
	b.ReportMetric(float64(verify)/n/float64(len(values)), "verify-cpu-ns/batch")
	b.ReportMetric(float64(decode)/n/float64(items), "decode-cpu-ns/item")
	b.ReportMetric(float64(verify)/float64(max(decode, 1))*100, "verify-%-of-decode")
	b.ReportMetric(float64(size)/float64(len(values)), "bytes/batch")
}

var decodeOpts = &Options{DeferRecords: true}
