package main

import (
	"sort"

	"github.com/infergate/infergate/monitor"
)

// seriesStats is one window/component of one series in /api/v1/series, in
// seconds like the metrics.
type seriesStats struct {
	Count   uint64  `json:"count"`
	P50     float64 `json:"p50_seconds"`
	P90     float64 `json:"p90_seconds"`
	P99     float64 `json:"p99_seconds"`
	P999    float64 `json:"p999_seconds"`
	Max     float64 `json:"max_seconds"`
	MeanSec float64 `json:"mean_seconds"`
}

// seriesDoc is one series in /api/v1/series.
type seriesDoc struct {
	Model     string `json:"model"`
	Version   string `json:"version"`
	Method    string `json:"method"`
	Upstream  string `json:"upstream"`
	CodeClass string `json:"code_class"`
	// Route is the route that answered: primary, fallback, cascade_edge
	// or cascade_escalated; Model stays the model the client asked for.
	Route string `json:"route"`
	Calls uint64 `json:"calls"`
	// Windows maps "1m", "5m", "15m" to components "total", "upstream",
	// "overhead" (and "queue" once a series has queued).
	Windows map[string]map[string]seriesStats `json:"windows"`
}

func seriesJSON(snaps []monitor.SeriesSnapshot) []seriesDoc {
	out := make([]seriesDoc, 0, len(snaps))
	for _, s := range snaps {
		d := seriesDoc{
			Model: s.Key.Model, Version: s.Key.Version, Method: s.Key.Method,
			Upstream: s.Key.Upstream, CodeClass: s.Key.CodeClass, Route: s.Key.Route, Calls: s.Calls,
			Windows: map[string]map[string]seriesStats{},
		}
		for w := monitor.Window(0); w < monitor.NumWindows; w++ {
			comps := map[string]seriesStats{}
			for c := monitor.Component(0); c < monitor.NumComponents; c++ {
				if c == monitor.ComponentQueue && !s.QueueSeen {
					continue
				}
				st := s.Stats[w][c]
				var mean float64
				if st.Count > 0 {
					mean = st.Sum.Seconds() / float64(st.Count)
				}
				comps[c.String()] = seriesStats{
					Count: st.Count, P50: st.P50.Seconds(), P90: st.P90.Seconds(), P99: st.P99.Seconds(),
					P999: st.P999.Seconds(), Max: st.Max.Seconds(), MeanSec: mean,
				}
			}
			d.Windows[w.String()] = comps
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if a.Method != b.Method {
			return a.Method < b.Method
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.CodeClass < b.CodeClass
	})
	return out
}
