package capture

import (
	"crypto/tls"
	"errors"
	"os"
	"runtime"
	"slices"
	"testing"
)

// Keep crypto/tls's Conn methods in this test binary.
var _ = (*tls.Conn).Write

// TestInspectTLSGo finds crypto/tls in this test binary, which go test
// links stripped (-s -w): every probed function is found through the
// runtime's function table, and each RET offset holds a RET opcode.
func TestInspectTLSGo(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the Go TLS probes are for amd64, this is %s", runtime.GOARCH)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tg, err := inspectTLS(exe)
	if err != nil {
		t.Fatalf("inspect %s: %v", exe, err)
	}
	if tg.lib != tlsLibGo || tg.goVersion != runtime.Version() {
		t.Fatalf("library %d, Go %q; want Go crypto/tls, %s", tg.lib, tg.goVersion, runtime.Version())
	}
	file, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fn := range tg.goFuncs {
		names = append(names, fn.name)
		if fn.name == goTLSHandshake {
			continue
		}
		if len(fn.rets) == 0 {
			t.Errorf("%s: no RET found", fn.name)
		}
		for _, r := range fn.rets {
			if b := file[fn.offset+r]; b != 0xc3 {
				t.Errorf("%s+%#x: byte %#x, not RET", fn.name, r, b)
			}
		}
	}
	if want := []string{goTLSWrite, goTLSRead, goTLSHandshake}; !slices.Equal(names, want) {
		t.Errorf("functions %v, want %v", names, want)
	}
}

// TestInspectTLSOpenSSL finds OpenSSL's functions in libssl, when the
// machine has one, and nothing in libc.
func TestInspectTLSOpenSSL(t *testing.T) {
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			if _, err := inspectTLS(p); !errors.Is(err, errNoTLSLib) {
				t.Errorf("%s: %v, want errNoTLSLib", p, err)
			}
			break
		}
	}
	lib := "/usr/lib/x86_64-linux-gnu/libssl.so.3"
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("no %s (apt-get install libssl3)", lib)
	}
	tg, err := inspectTLS(lib)
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"SSL_write", "SSL_read", "SSL_write_ex", "SSL_read_ex", "SSL_connect", "SSL_do_handshake"} {
		if tg.lib != tlsLibOpenSSL || !slices.Contains(tg.ssl, fn) {
			t.Errorf("%s: library %d, functions %v; want OpenSSL with %s", lib, tg.lib, tg.ssl, fn)
		}
	}
}
