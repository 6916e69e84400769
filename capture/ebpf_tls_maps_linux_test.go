//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestMappedLibs reads the libssl files and the JVM mark out of a
// /proc/PID/maps.
func TestMappedLibs(t *testing.T) {
	tests := []struct {
		name string
		maps string
		libs []string
		jvm  bool
	}{{
		name: "librdkafka client",
		maps: "55d0c0a00000-55d0c0a1e000 r--p 00000000 08:01 1835421   /usr/bin/kcat\n" +
			"7f2cc05d0000-7f2cc05ed000 r--p 00000000 08:01 1836092   /usr/lib/x86_64-linux-gnu/libssl.so.3\n" +
			"7f2cc05ed000-7f2cc0648000 r-xp 0001d000 08:01 1836092   /usr/lib/x86_64-linux-gnu/libssl.so.3\n" +
			"7f2cc0a3c000-7f2cc0a80000 r--p 00000000 08:01 1836001   /usr/lib/x86_64-linux-gnu/librdkafka.so.1\n" +
			"7ffd1c5e1000-7ffd1c602000 rw-p 00000000 00:00 0         [stack]\n",
		libs: []string{"/usr/lib/x86_64-linux-gnu/libssl.so.3"},
	}, {
		name: "JVM; a libssl replaced on disk is not the one mapped",
		maps: "7f00000000-7f00001000 r-xp 00000000 08:01 42 /usr/lib/jvm/java-17/lib/server/libjvm.so\n" +
			"7f00002000-7f00003000 r-xp 00000000 08:01 43 /usr/lib/x86_64-linux-gnu/libssl.so.3 (deleted)\n",
		jvm: true,
	}, {
		name: "anonymous and pseudo mappings",
		maps: "7f00000000-7f00001000 rw-p 00000000 00:00 0\n7ffd1c5e1000-7ffd1c602000 rw-p 00000000 00:00 0 [vdso]\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "maps")
			if err := os.WriteFile(path, []byte(tc.maps), 0o600); err != nil {
				t.Fatal(err)
			}
			libs, jvm := mappedLibs(path)
			if !reflect.DeepEqual(libs, tc.libs) || jvm != tc.jvm {
				t.Errorf("libs %v jvm %v, want %v %v", libs, jvm, tc.libs, tc.jvm)
			}
		})
	}
}
