package main

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/kwire/kwire/metrics"
)

// metricsTimeouts bound what one client of --metrics can hold: a
// connection that sends its request headers slowly (slowloris), a request
// that never ends, a client that never reads the response, a keep-alive
// connection left idle. Without IdleTimeout, net/http keeps an idle
// keep-alive connection, and its goroutine and buffers, for ever. A
// variable for tests.
var metricsTimeouts = struct {
	readHeader, read, write, idle time.Duration
}{
	readHeader: 10 * time.Second,
	read:       15 * time.Second,
	// A scrape of many series takes a while to write; Prometheus's own
	// scrape timeout is 10 s by default.
	write: 60 * time.Second,
	// Longer than Prometheus's default scrape interval (1 min), so a
	// scraper's keep-alive connection is reused between scrapes.
	idle: 90 * time.Second,
}

// metricsMaxHeaderBytes bounds a request's headers: a scrape sends a few
// hundred bytes.
const metricsMaxHeaderBytes = 16 << 10

// serveMetrics listens on addr and serves x at /metrics in the
// background. It returns the server (Close stops it) and the address
// listened on (addr may ask for port 0).
func serveMetrics(addr string, x *metrics.Exporter) (*http.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", x.Handler())
	srv := &http.Server{Handler: mux,
		ReadHeaderTimeout: metricsTimeouts.readHeader, ReadTimeout: metricsTimeouts.read,
		WriteTimeout: metricsTimeouts.write, IdleTimeout: metricsTimeouts.idle,
		MaxHeaderBytes: metricsMaxHeaderBytes}
	go srv.Serve(ln)
	return srv, ln.Addr(), nil
}
