package main

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3"; otherwise the module version Go
// recorded, or "devel".
var version = ""

// buildInfo returns the version, the VCS revision (with "-dirty" when the
// tree had changes) and the Go version the binary was built with.
func buildInfo() (ver, revision, goVersion string) {
	ver, revision, goVersion = version, "unknown", runtime.Version()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if ver == "" {
			ver = "devel"
		}
		return ver, revision, goVersion
	}
	if ver == "" {
		ver = bi.Main.Version
		if ver == "" || ver == "(devel)" {
			ver = "devel"
		}
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && revision != "unknown" {
		revision += "-dirty"
	}
	return ver, revision, goVersion
}

// newBuildInfo returns the infergate_build_info gauge: always 1, with the
// build as labels, so dashboards can tell which version each replica runs.
func newBuildInfo() prometheus.Collector {
	ver, rev, gov := buildInfo()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "infergate_build_info",
		Help:        "A metric with a constant 1 value labelled by the version, VCS revision and Go version infergate was built with.",
		ConstLabels: prometheus.Labels{"version": ver, "revision": rev, "goversion": gov},
	}, func() float64 { return 1 })
}
