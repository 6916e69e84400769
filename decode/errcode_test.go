package decode

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestErrorCodeFast holds ErrorCode's cases without reflection to the
// reflection they stand beside: the same code for every response shape,
// errors anywhere or nowhere.
func TestErrorCodeFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	code := func() int16 {
		if rng.IntN(4) == 0 {
			return int16(rng.IntN(100))
		}
		return 0
	}
	for range 2000 {
		fetch := kmsg.NewPtrFetchResponse()
		fetch.ErrorCode = code()
		produce, commit := kmsg.NewPtrProduceResponse(), kmsg.NewPtrOffsetCommitResponse()
		for range rng.IntN(3) {
			ft, pt, ct := kmsg.NewFetchResponseTopic(), kmsg.NewProduceResponseTopic(), kmsg.NewOffsetCommitResponseTopic()
			for range rng.IntN(4) {
				fp, pp, cp := kmsg.NewFetchResponseTopicPartition(), kmsg.NewProduceResponseTopicPartition(), kmsg.NewOffsetCommitResponseTopicPartition()
				fp.ErrorCode, pp.ErrorCode, cp.ErrorCode = code(), code(), code()
				ft.Partitions, pt.Partitions, ct.Partitions = append(ft.Partitions, fp), append(pt.Partitions, pp), append(ct.Partitions, cp)
			}
			fetch.Topics, produce.Topics, commit.Topics = append(fetch.Topics, ft), append(produce.Topics, pt), append(commit.Topics, ct)
		}
		for _, r := range []kmsg.Response{fetch, produce, commit} {
			if got, want := ErrorCode(r), errorCode(reflect.ValueOf(r).Elem(), 0); got != want {
				t.Fatalf("%T: ErrorCode %d, by reflection %d: %+v", r, got, want, r)
			}
		}
	}
}
