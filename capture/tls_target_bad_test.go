package capture

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestInspectTLSDamaged: ELF files damaged or crafted to break the
// readers are each an error of their own (errBadELF), never kwire's end.
// A Go binary whose function table claims 0xf0000000 functions made
// gosym ask for 386 GB before reading any: "fatal error: runtime: out of
// memory", which no recover catches, killed kwire live --ebpf --tls, which
// reads the executables of every process on the host.
func TestInspectTLSDamaged(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the Go TLS probes read x86-64 binaries, this is %s", runtime.GOARCH)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	pcln := f.Section(".gopclntab")
	f.Close()
	if pcln == nil || raw[pcln.Offset+7] != 8 {
		t.Fatalf("%s: no .gopclntab with 8-byte words", exe)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
		want   string
	}{
		{"function count", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[pcln.Offset+8:], 0xf0000000)
			return b
		}, "go function table claims 4026531840 functions"},
		{"pointer size", func(b []byte) []byte { b[pcln.Offset+7] = 3; return b }, "go function table with 3-byte pointers"},
		{"truncated", func(b []byte) []byte { return b[:pcln.Offset+10] }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(path, tc.damage(append([]byte(nil), raw...)), 0o600); err != nil {
				t.Fatal(err)
			}
			tg, err := inspectTLS(path)
			if err == nil {
				t.Fatalf("found %+v in a damaged file", tg)
			}
			if tc.want != "" && (!errors.Is(err, errBadELF) || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("error %q, want errBadELF saying %q", err, tc.want)
			}
		})
	}
}

// TestRecoverELF: a reader's panic becomes the file's error.
func TestRecoverELF(t *testing.T) {
	err := func() (err error) {
		defer recoverELF(&err)
		var b []byte
		_ = b[7] // as a reader indexing past a crafted length does
		return nil
	}()
	if !errors.Is(err, errBadELF) || !strings.Contains(err.Error(), "index out of range") {
		t.Errorf("error %v, want errBadELF with the panic's words", err)
	}
}
