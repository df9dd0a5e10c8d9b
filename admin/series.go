package admin

import (
	"sort"
	"time"

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
	// SizeClass is the class of the calls' request bytes (le_4KiB ..
	// gt_16MiB); "" for streams.
	SizeClass string `json:"size_class"`
	Calls     uint64 `json:"calls"`
	// Windows maps "1m", "5m", "15m" to components "total", "upstream",
	// "overhead" (and "queue" once a series has queued).
	Windows map[string]map[string]seriesStats `json:"windows"`
	// Stream maps the same windows to the requests measured inside the
	// series' streams (ModelStreamInfer); absent for other series.
	Stream map[string]streamDoc `json:"stream,omitempty"`
}

// streamDoc is one window of a series' stream quantities.
type streamDoc struct {
	FirstResponse seriesStats `json:"first_response"`
	ResponseGap   seriesStats `json:"response_gap"`
	Responses     countStats  `json:"responses_per_request"`
}

// countStats is seriesStats for a count (responses per request): the
// same fields without the unit in their names.
type countStats struct {
	Count   uint64  `json:"count"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p999"`
	Max     float64 `json:"max"`
	MeanSec float64 `json:"mean"`
}

// statsOf converts st, whose values unit turns into seconds or a count.
func statsOf(st monitor.Stats, unit func(time.Duration) float64) seriesStats {
	var mean float64
	if st.Count > 0 {
		mean = unit(st.Sum) / float64(st.Count)
	}
	return seriesStats{Count: st.Count, P50: unit(st.P50), P90: unit(st.P90), P99: unit(st.P99),
		P999: unit(st.P999), Max: unit(st.Max), MeanSec: mean}
}

func seriesJSON(snaps []monitor.SeriesSnapshot) []seriesDoc {
	out := make([]seriesDoc, 0, len(snaps))
	for _, s := range snaps {
		d := seriesDoc{
			Model: s.Key.Model, Version: s.Key.Version, Method: s.Key.Method,
			Upstream: s.Key.Upstream, CodeClass: s.Key.CodeClass, Route: s.Key.Route,
			SizeClass: s.Key.SizeClass, Calls: s.Calls,
			Windows: map[string]map[string]seriesStats{},
		}
		for w := monitor.Window(0); w < monitor.NumWindows; w++ {
			comps := map[string]seriesStats{}
			for c := monitor.Component(0); c < monitor.NumComponents; c++ {
				if c == monitor.ComponentQueue && !s.QueueSeen {
					continue
				}
				comps[c.String()] = statsOf(s.Stats[w][c], time.Duration.Seconds)
			}
			d.Windows[w.String()] = comps
			if s.Stream == nil {
				continue
			}
			if d.Stream == nil {
				d.Stream = map[string]streamDoc{}
			}
			st := s.Stream[w]
			d.Stream[w.String()] = streamDoc{
				FirstResponse: statsOf(st[monitor.StreamFirstResponse], monitor.StreamFirstResponse.Value),
				ResponseGap:   statsOf(st[monitor.StreamResponseGap], monitor.StreamResponseGap.Value),
				Responses:     countStats(statsOf(st[monitor.StreamResponses], monitor.StreamResponses.Value)),
			}
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
