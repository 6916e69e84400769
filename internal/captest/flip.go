package captest

import (
	"math"
	"math/rand/v2"
)

// FileHeaderBytes is how many leading bytes FlipBytes leaves intact: the
// pcap file header (24 bytes) and the start of a pcapng Section Header
// Block, so that the file is still recognised as a capture.
const FileHeaderBytes = 64

// FlipBytes returns a copy of src with round(frac*len(src)) distinct bytes,
// chosen at random past the first FileHeaderBytes, each XOR-ed with a
// random non-zero value: a transfer that damaged bytes in place, without
// adding or losing any. The same src, frac and seed flip the same bytes.
// If fewer bytes than asked lie past the header, all of them are flipped.
func FlipBytes(src []byte, frac float64, seed uint64) []byte {
	out := make([]byte, len(src))
	copy(out, src)
	span := len(src) - FileHeaderBytes
	if span <= 0 || frac <= 0 {
		return out
	}
	n := min(int(math.Round(frac*float64(len(src)))), span)
	rng := rand.New(rand.NewPCG(seed, seed^0x632be59bd9b4e019))
	flipped := make([]bool, span)
	for n > 0 {
		i := rng.IntN(span)
		if flipped[i] {
			continue
		}
		flipped[i] = true
		out[FileHeaderBytes+i] ^= byte(1 + rng.IntN(255))
		n--
	}
	return out
}
