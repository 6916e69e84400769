//go:build !linux || !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture

import (
	"context"
	"fmt"
	"runtime"
)

// EBPF is an eBPF capture; it needs Linux on a little-endian machine (see
// ebpf_linux.go). Elsewhere OpenEBPF fails with ErrEBPFUnavailable.
type EBPF struct{}

// OpenEBPF fails with ErrEBPFUnavailable: capture packets instead.
func OpenEBPF(eo *EBPFOptions, opts *Options) (*EBPF, error) {
	return nil, fmt.Errorf("%w: kwire's probes are built for Linux on little-endian machines, this is %s/%s", ErrEBPFUnavailable, runtime.GOOS, runtime.GOARCH)
}

// Run fails with ErrEBPFUnavailable.
func (e *EBPF) Run(ctx context.Context, sink Sink) error { return ErrEBPFUnavailable }

// Stats returns zero counters.
func (e *EBPF) Stats() Stats { return Stats{Live: &LiveStats{}, EBPF: &EBPFStats{}} }

// Hooks returns "".
func (e *EBPF) Hooks() string { return "" }

// Close does nothing.
func (e *EBPF) Close() error { return nil }

// TLSReport returns nil.
func (e *EBPF) TLSReport() []string { return nil }
