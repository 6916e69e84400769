package correlate

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// TestDetachCopiesWhatIsRead: after Detach, the decoder's buffers may be
// reused; what the correlator reads must not change, and the arena grows
// by exactly the bytes kept.
func TestDetachCopiesWhatIsRead(t *testing.T) {
	buf := bytes.Repeat([]byte{7}, 300)
	fetch := kmsg.NewPtrFetchResponse()
	fetch.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{
		{Partition: 0, RecordBatches: buf[:100]}, {Partition: 1, RecordBatches: buf[100:150]}, {Partition: 2},
	}}}
	produce := kmsg.NewPtrProduceRequest()
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: buf[150:]}}}}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "m", MemberAssignment: buf[150:160]}}
	syncResp := kmsg.NewPtrSyncGroupResponse()
	syncResp.MemberAssignment = buf[160:170]

	var arena []byte
	arena = Detach(&decode.Exchange{Req: produce, Resp: fetch}, arena)
	arena = Detach(&decode.Exchange{Req: sync, Resp: syncResp}, arena)
	clear(buf) // the decoder reuses its buffers

	if got := fetch.Topics[0].Partitions[0].RecordBatches; !bytes.Equal(got, bytes.Repeat([]byte{7}, 100)) {
		t.Errorf("partition 0 record batches = %v, want the 100 bytes as they were", got)
	}
	if got := fetch.Topics[0].Partitions[1].RecordBatches; !bytes.Equal(got, bytes.Repeat([]byte{7}, 50)) {
		t.Errorf("partition 1 record batches = %v, want the 50 bytes as they were", got)
	}
	if got := fetch.Topics[0].Partitions[2].RecordBatches; got != nil {
		t.Errorf("partition 2 had no record batches, now %v", got)
	}
	if got := produce.Topics[0].Partitions[0].Records; got != nil {
		t.Errorf("produce records = %d bytes, want nil (the correlator does not read them)", len(got))
	}
	if got := sync.GroupAssignment[0].MemberAssignment; !bytes.Equal(got, bytes.Repeat([]byte{7}, 10)) {
		t.Errorf("sync assignment = %v", got)
	}
	if got := syncResp.MemberAssignment; !bytes.Equal(got, bytes.Repeat([]byte{7}, 10)) {
		t.Errorf("sync response assignment = %v", got)
	}
	if len(arena) != 170 {
		t.Errorf("arena holds %d bytes, want 170", len(arena))
	}
	// A kept slice cannot grow into the next one.
	p0 := fetch.Topics[0].Partitions[0].RecordBatches
	if cap(p0) != len(p0) {
		t.Errorf("kept slice has cap %d > len %d: an append would overwrite the arena", cap(p0), len(p0))
	}
}
