package route

import (
	"time"

	"github.com/infergate/infergate/monitor"
)

// minLatencyCalls is the least number of successful primary calls in
// LatencyWindow for their statistics to set a hedge delay or shed on a
// deadline: a tail quantile of fewer calls is noise.
const minLatencyCalls = 20

// PrimaryLatency returns the RouterOptions.Latency that reads mon: the
// statistics of a model's successful calls on its primary route over
// LatencyWindow, unknown while there are fewer than 20 of them.
func PrimaryLatency(mon *monitor.Registry) func(model string) (monitor.Stats, bool) {
	slices := int(LatencyWindow / time.Second)
	return func(model string) (monitor.Stats, bool) {
		stats, _ := mon.Recent(slices, func(k monitor.SeriesKey) string {
			if k.Model != model || k.CodeClass != monitor.CodeClassOK || k.Route != monitor.RoutePrimary {
				return ""
			}
			return model
		})
		rs, ok := stats[model]
		st := rs.Stats[monitor.ComponentTotal]
		if !ok || st.Count < minLatencyCalls {
			return monitor.Stats{}, false
		}
		return st, true
	}
}
