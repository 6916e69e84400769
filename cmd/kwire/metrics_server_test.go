package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/kwire/kwire/metrics"
)

// TestMetricsServerTimeouts: a client of --metrics that holds its
// connection (idle after a scrape with keep-alive, headers sent slowly,
// a body that never comes) is disconnected after the server's timeouts;
// before, an idle keep-alive connection was held for ever.
func TestMetricsServerTimeouts(t *testing.T) {
	saved := metricsTimeouts
	defer func() { metricsTimeouts = saved }()
	const short = 200 * time.Millisecond
	metricsTimeouts.readHeader, metricsTimeouts.read, metricsTimeouts.write, metricsTimeouts.idle = short, short, short, short

	srv, addr, err := serveMetrics("127.0.0.1:0", metrics.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		send   string
		scrape bool // a whole request: read its response first
	}{
		{"idle keep-alive", "GET /metrics HTTP/1.1\r\nHost: kwire\r\n\r\n", true},
		{"slow headers", "GET /metrics HTTP/1.1\r\nHost: kwire\r\nX-Slow: ", false},
		{"body never sent", "POST /metrics HTTP/1.1\r\nHost: kwire\r\nContent-Length: 1000\r\n\r\nabc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Far beyond the server's timeouts: reaching it is the failure.
			conn.SetDeadline(time.Now().Add(50 * short))
			if _, err := io.WriteString(conn, tc.send); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			if tc.scrape {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || len(body) == 0 || resp.Close {
					t.Fatalf("scrape: status %d, %d bytes, close %v, err %v: want 200, metrics, keep-alive", resp.StatusCode, len(body), resp.Close, err)
				}
			}
			start := time.Now()
			_, err = io.Copy(io.Discard, br) // until the server closes
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("connection still open after %v: the server holds it", time.Since(start))
			}
			if err != nil && !errors.Is(err, net.ErrClosed) {
				t.Logf("closed with %v", err) // a reset is a close too
			}
		})
	}
}
