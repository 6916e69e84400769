package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kwire/kwire/internal/version"
)

// newBuildInfo is kwire_build_info: always 1, labelled with what ran
// (version, commit, Go version), as Prometheus' own and most exporters'
// <name>_build_info are; dashboards join on it and alert when agents run
// different versions.
func newBuildInfo() prometheus.Collector {
	in := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "kwire", Name: "build_info",
		Help:        "Always 1: the kwire that exports these metrics (version, commit it was built from, Go version).",
		ConstLabels: prometheus.Labels{"version": in.Version, "revision": in.Commit, "goversion": in.Go},
	})
	g.Set(1)
	return g
}
