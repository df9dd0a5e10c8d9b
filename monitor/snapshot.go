package monitor

import "time"

// Window names a rolling window of a snapshot.
type Window int

// The rolling windows. Window1m is the last 60 completed slices (one
// minute at the default 1s slice). Window5m and Window15m advance in
// one-minute steps: the current, partial minute plus the 4 (or 14) minutes
// before it, so they never hold data older than 5 (or 15) minutes.
const (
	Window1m Window = iota
	Window5m
	Window15m
	NumWindows = 3
)

var windowNames = [NumWindows]string{"1m", "5m", "15m"}

// coarseSlots is how many one-minute buckets each series keeps: enough for
// the 15m window.
const coarseSlots = 15

// windowMinutes is how many one-minute buckets (the current one included)
// Window5m and Window15m merge.
var windowMinutes = [NumWindows]int{0, 5, 15}

// String returns "1m", "5m" or "15m".
func (w Window) String() string {
	if w < 0 || w >= NumWindows {
		return "unknown"
	}
	return windowNames[w]
}

// ParseWindow returns the Window named by s ("1m", "5m", "15m").
func ParseWindow(s string) (Window, bool) {
	for i, n := range windowNames {
		if n == s {
			return Window(i), true
		}
	}
	return 0, false
}

// Component names one measured part of a call.
type Component int

// The measured components of a call. ComponentOverhead is Total - Upstream
// - Queue, clamped at 0.
const (
	ComponentTotal Component = iota
	ComponentUpstream
	ComponentOverhead
	ComponentQueue
	NumComponents = 4
)

var componentNames = [NumComponents]string{"total", "upstream", "overhead", "queue"}

// String returns "total", "upstream", "overhead" or "queue".
func (c Component) String() string {
	if c < 0 || c >= NumComponents {
		return "unknown"
	}
	return componentNames[c]
}

// ParseComponent returns the Component named by s.
func ParseComponent(s string) (Component, bool) {
	for i, n := range componentNames {
		if n == s {
			return Component(i), true
		}
	}
	return 0, false
}

// Quantiles are the quantiles every Stats reports, as fractions.
var Quantiles = [...]float64{0.5, 0.9, 0.99, 0.999}

// percentiles are Quantiles as HDR wants them (percent).
var percentiles = []float64{50, 90, 99, 99.9}

// Stats describes one component of one series over one window. Quantiles
// come from the HDR histograms (within 0.1%, never above Max); Count, Sum
// and Max are exact. All are zero when Count is zero.
type Stats struct {
	Count uint64
	Sum   time.Duration
	P50   time.Duration
	P90   time.Duration
	P99   time.Duration
	P999  time.Duration
	Max   time.Duration
}

// Quantile returns the reported quantile at or above q: q <= 0.5 gives P50,
// q <= 0.9 P90, q <= 0.99 P99, q <= 0.999 P999, and anything higher Max.
// Asking for an unreported q so errs on the slow side.
func (st Stats) Quantile(q float64) time.Duration {
	switch {
	case q <= 0.5:
		return st.P50
	case q <= 0.9:
		return st.P90
	case q <= 0.99:
		return st.P99
	case q <= 0.999:
		return st.P999
	}
	return st.Max
}

// SeriesSnapshot holds one series' statistics for every window and
// component at one instant.
type SeriesSnapshot struct {
	Key SeriesKey
	At  time.Time // the registry clock when the snapshot was taken
	// Stats is indexed [Window][Component].
	Stats [NumWindows][NumComponents]Stats
	// Calls is the number of calls recorded since the series was created
	// and included in the windows (all but the current slice).
	Calls uint64
	// QueueSeen reports whether any call of the series ever waited in a
	// queue (Queue > 0).
	QueueSeen bool
	// Stream holds the stream quantities (RecordStream); nil for a series
	// that never had a stream sample.
	Stream *StreamStats
}

// Get returns the stats of one window ("1m", "5m", "15m") and component
// ("total", "upstream", "overhead", "queue"); ok is false for unknown names.
func (s SeriesSnapshot) Get(window, component string) (st Stats, ok bool) {
	w, ok1 := ParseWindow(window)
	c, ok2 := ParseComponent(component)
	if !ok1 || !ok2 {
		return Stats{}, false
	}
	return s.Stats[w][c], true
}
