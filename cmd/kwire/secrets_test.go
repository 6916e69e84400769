package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/kwire/kwire/internal/gen"
)

// TestSecretsNeverPrinted runs every output format over the sasl capture
// (real kgo and sarama clients authenticating with PLAIN and SCRAM to a
// SASL-enabled kfake) and greps for the passwords, which the capture holds
// in the clear (PLAIN tokens).
func TestSecretsNeverPrinted(t *testing.T) {
	file := filepath.Join(testdataDir(), "sasl.pcapng")
	if raw := readFile(t, file); !bytes.Contains(raw, []byte(gen.SASLPasswords[0])) {
		t.Fatalf("%s does not hold the PLAIN password in the clear: the test would prove nothing", file)
	}
	for _, args := range [][]string{
		{"read", "--json", file}, {"read", "--text", file},
		{"analyze", "--json", file}, {"analyze", "--text", file},
	} {
		out := runKwire(t, args...)
		if len(out) == 0 {
			t.Fatalf("kwire %v wrote nothing", args)
		}
		for _, pw := range gen.SASLPasswords {
			if bytes.Contains(out, []byte(pw)) {
				t.Errorf("kwire %v printed the password %q", args, pw)
			}
		}
		if args[0] == "read" && !bytes.Contains(out, []byte("SASLAuthenticate")) {
			t.Errorf("kwire %v: no SASLAuthenticate exchange decoded", args)
		}
	}
}
