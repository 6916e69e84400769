package wire

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	hexA = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	hexB = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeffe0e1e2e3e4e5e6e7e8e9eaebecedeeef"
	hexS = "5555555555555555555555555555555555555555555555555555555555555555"
)

func mustKeys(t testing.TB, text string) []Key {
	t.Helper()
	keys, err := ParseKeys([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// batchOf encodes a batch of host with n counters items.
func batchOf(host string, seq uint64, n int) []byte {
	e := NewEncoder(Agent{Host: host, Run: 7})
	e.Reset(seq)
	for i := range n {
		e.Counters(time.Unix(1700000000, int64(i)), &Counters{Publish: PublishStats{Batches: uint64(i)}})
	}
	return bytes.Clone(e.Bytes())
}

func signed(t testing.TB, keyText, host string) []byte {
	t.Helper()
	return NewSigner(mustKeys(t, keyText)[0]).Sign(batchOf(host, 1, 3))
}

func TestParseKeys(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // agents
		err        string
	}{
		{name: "one", text: "b1 " + hexA + "\n", want: []string{"b1"}},
		{name: "keyring", text: "# the agents\n\nb1 " + hexA + "\n  b2\t" + hexB + "\n* " + hexS, want: []string{"b1", "b2", "*"}},
		{name: "not hex", text: "b1 not-a-key-at-all-zzzzzzzzzzzzzzzzzzzzzzzz", err: "line 1: agent b1: the key is not hex"},
		{name: "short", text: "b1 00010203", err: "line 1: agent b1: the key has 4 bytes, want at least 16"},
		{name: "no name", text: hexA, err: "line 1: want NAME HEXKEY"},
		{name: "three fields", text: "\nb1 " + hexA + " extra", err: "line 2: want NAME HEXKEY"},
		{name: "empty", text: "# nothing\n", err: "no key in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := ParseKeys([]byte(tc.text))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				if strings.Contains(err.Error(), hexA[:16]) {
					t.Errorf("the error shows the key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range keys {
				got = append(got, k.Agent)
			}
			if !reflect.DeepEqual(tc.want, got) {
				t.Errorf("agents: got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestVerify: a batch verifies only with a key of the host it names (or
// a shared key); another agent's key, no key, a changed byte or an
// unsigned batch do not.
func TestVerify(t *testing.T) {
	ring := "b1 " + hexA + "\nb2 " + hexB + "\n"
	tampered := signed(t, "b1 "+hexA, "b1")
	tampered[len(tampered)-TagSize-2] ^= 1
	// b2's batch, signed by b2, relabelled as b1's (same length name):
	// the tag is b2's, not b1's.
	relabelled := signed(t, "b2 "+hexB, "b2")
	relabelled[bytes.Index(relabelled, []byte("b2"))+1] = '1'
	for _, tc := range []struct {
		name, ring string
		value      []byte
		agent      string
		err        error
	}{
		{name: "own key", ring: ring, value: signed(t, "b1 "+hexA, "b1"), agent: "b1"},
		{name: "other agent's key", ring: ring, value: signed(t, "b2 "+hexB, "b1"), agent: "b1", err: ErrBadTag},
		{name: "unknown key", ring: ring, value: signed(t, "b1 "+hexS, "b1"), agent: "b1", err: ErrBadTag},
		{name: "agent not in the keyring", ring: ring, value: signed(t, "b3 "+hexS, "b3"), agent: "b3", err: ErrUnknownAgent},
		{name: "unsigned", ring: ring, value: batchOf("b1", 1, 3), agent: "b1", err: ErrUnsigned},
		{name: "changed after signing", ring: ring, value: tampered, agent: "b1", err: ErrBadTag},
		{name: "relabelled", ring: ring, value: relabelled, agent: "b1", err: ErrBadTag},
		{name: "shared key, any name", ring: ring + "* " + hexS, value: signed(t, "* "+hexS, "b9"), agent: "b9"},
		{name: "shared key in the keyring, own key used", ring: ring + "* " + hexS, value: signed(t, "b1 "+hexA, "b1"), agent: "b1"},
		{name: "replaced key", ring: ring + "b1 " + hexS, value: signed(t, "b1 "+hexS, "b1"), agent: "b1"},
		{name: "empty", ring: ring, value: nil, err: ErrUnsigned},
		{name: "tag cut", ring: ring, value: signed(t, "b1 "+hexA, "b1")[:20], agent: "b1", err: ErrUnsigned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kr := NewKeyring(mustKeys(t, tc.ring))
			agent, err := kr.Verify(tc.value)
			if !errors.Is(err, tc.err) || agent != tc.agent {
				t.Errorf("Verify = %q, %v; want %q, %v", agent, err, tc.agent, tc.err)
			}
		})
	}
}

// TestDecodeSigned: a signed batch decodes as the unsigned one.
func TestDecodeSigned(t *testing.T) {
	plain := batchOf("b1", 4, 5)
	want, err := Decode(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(NewSigner(mustKeys(t, "b1 "+hexA)[0]).Sign(bytes.Clone(plain)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("signed batch decoded as %+v, want the unsigned one's %+v", got, want)
	}
	if _, err := Decode([]byte{VersionSigned, 1, 2}, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a signed batch shorter than its tag: %v", err)
	}
}

// BenchmarkVerify is the aggregator's cost of verifying one record (an
// agent batch) of each size: agents send batches at 64 KiB or 100 ms,
// about 97 bytes an exchange (docs/aggregate.md).
func BenchmarkVerify(b *testing.B) {
	kr := NewKeyring(mustKeys(b, "b1 "+hexA+"\nb2 "+hexB))
	s := NewSigner(mustKeys(b, "b1 "+hexA)[0])
	for _, size := range []int{1 << 10, 16 << 10, 64 << 10} {
		v := batchOf("b1", 1, 1)
		for len(v) < size {
			v = append(v, batchOf("b1", 1, 1)[len("\x02\x02b1\x07\x01"):]...)
		}
		v = s.Sign(v)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := kr.Verify(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
