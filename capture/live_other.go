//go:build !linux

package capture

import (
	"context"
	"fmt"
	"runtime"
)

// Live is a live capture; it needs Linux (see live_linux.go). Elsewhere
// OpenLive fails with ErrNotSupported.
type Live struct{}

// OpenLive fails with ErrNotSupported off Linux: capture with tcpdump and
// read the file with kwire analyze instead.
func OpenLive(lo *LiveOptions, opts *Options) (*Live, error) {
	return nil, fmt.Errorf("%w, this is %s: capture with tcpdump and analyze the file instead", ErrNotSupported, runtime.GOOS)
}

// Run fails with ErrNotSupported.
func (l *Live) Run(ctx context.Context, sink Sink) error { return ErrNotSupported }

// Stats returns zero counters.
func (l *Live) Stats() Stats { return Stats{Live: &LiveStats{}} }

// Filter returns "".
func (l *Live) Filter() string { return "" }

// Interface returns "".
func (l *Live) Interface() string { return "" }

// Close does nothing.
func (l *Live) Close() error { return nil }
