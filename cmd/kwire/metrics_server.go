package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/kwire/kwire/metrics"
)

// metricsFlags are --metrics and the flags that shape what it exports, in
// kwire live and kwire aggregate (docs/metrics.md). The group label
// follows --max-groups; the other caps are their own.
type metricsFlags struct {
	addr                                         string
	noPartitionLabels, memberInfo                bool
	topics, partitions, members, txnIDs, brokers int
}

func (f *metricsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "metrics", "", "serve Prometheus metrics on `ADDR` at /metrics (docs/metrics.md): 127.0.0.1:9464 for this host only; :9464 serves every interface, to anyone who reaches the host")
	fs.BoolVar(&f.noPartitionLabels, "no-partition-labels", false, "with --metrics, sum the per-partition metrics per topic (fewer series)")
	fs.BoolVar(&f.memberInfo, "metrics-member-info", false, "with --metrics, also export kwire_group_member_info: a series per live member with its member id, "+
		"client and process; every consumer restart makes new series")
	fs.IntVar(&f.topics, "metrics-max-topics", 10000, "with --metrics, most topic label values; further topics are exported as topic=\"other\" "+
		"(kwire_metrics_label_values_folded). The consumergroup label follows --max-groups (groups only named in requests get a tenth of it)")
	fs.IntVar(&f.partitions, "metrics-max-partitions", 50000, "with --metrics, most partition series per metric (groups only named in requests get a tenth of it apart); "+
		"further partitions are exported as partition=\"other\", summed")
	fs.IntVar(&f.members, "metrics-max-members", 20000, "with --metrics-member-info, most members of kwire_group_member_info; further ones are one member_id=\"other\" series per group")
	fs.IntVar(&f.txnIDs, "metrics-max-transactional-ids", 10000, "with --metrics, most transactional_id label values of ids with a producer "+
		"(ids only named in requests get a tenth of it apart); further ones are transactional_id=\"other\", summed")
	fs.IntVar(&f.brokers, "metrics-max-brokers", 1000, "with --metrics, most broker label values (broker addresses); further ones are broker=\"other\"")
}

// options returns the exporter's options; maxGroups is --max-groups.
func (f *metricsFlags) options(maxGroups int) *metrics.Options {
	return &metrics.Options{NoPartitionLabels: f.noPartitionLabels, MemberInfo: f.memberInfo, MaxGroups: maxGroups, MaxTopics: f.topics,
		MaxPartitions: f.partitions, MaxMembers: f.members, MaxTransactionalIDs: f.txnIDs, MaxBrokers: f.brokers}
}

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
