package monitor

import "time"

// Series returns the series for key, creating it if needed (the overflow
// series past the caps). Production code records through Registry.Record,
// which looks the series up per call; tests hold the series to look inside.
func (r *Registry) Series(key SeriesKey) *Series {
	s, _ := r.lookup(key)
	return s
}

// Len returns the number of series, not counting the overflow series.
func (r *Registry) Len() int { return len(r.state.Load().m) }

// Key returns the series key.
func (s *Series) Key() SeriesKey { return s.key }

// Record records one finished call on the series itself (a dropped series
// refuses it), without Registry.Record's lookup.
func (s *Series) Record(sm Sample) { s.record(sm) }

// Overhead returns the proxy's own share of the call as the series derive
// it: Total - Upstream - Queue, clamped at 0 because the components are
// read from separate clocks.
func (sm Sample) Overhead() time.Duration {
	o := sm.Total - max(sm.Upstream, 0) - max(sm.Queue, 0)
	return max(o, 0)
}

// Quantile returns quantile q of a component over a window, for example
// s.Quantile("1m", "total", 0.99); see Stats.Quantile for unreported q. It
// returns 0 for unknown names and for windows without calls.
func (s SeriesSnapshot) Quantile(window, component string, q float64) time.Duration {
	st, _ := s.Get(window, component)
	return st.Quantile(q)
}
