package pool

import "sync/atomic"

// outlierState is what judges an endpoint for ejection (outlier.go): its
// failures in a row and over a window, its service time, its answers
// since it was admitted, and whether and why it is out.
type outlierState struct {
	fails        atomic.Int32 // failures in a row
	ejectedUntil atomic.Int64 // unix nanoseconds; 0: not ejected
	ejections    atomic.Int32 // how many times it was ejected
	// since is when it last became able to take calls (connected again,
	// back from an ejection; unix nanoseconds, 0: from the start), for
	// its slow start.
	since atomic.Int64
	why   atomic.Pointer[string]
	// The calls that judged it (answers and failures) in the current
	// window of ratioWindow, for ejection on a failure ratio; ratioEpoch
	// is the window's number.
	ratioCalls, ratioFailed atomic.Int32
	ratioEpoch              atomic.Int64
	// svc is its service time for its calls that name no model, for
	// ejection on latency; a model's is in the endpoint's lat.
	svc serviceMin
	// answers counts its successful answers since it was last admitted.
	answers atomic.Int32
}

// countJudged counts one call that judged e at t (failed or not) in the
// current window, and returns the window's calls and failures.
func (e *outlierState) countJudged(t int64, failed bool) (calls, fails int32) {
	if ep := t / int64(ratioWindow); e.ratioEpoch.Load() != ep {
		if old := e.ratioEpoch.Load(); old != ep && e.ratioEpoch.CompareAndSwap(old, ep) {
			e.ratioCalls.Store(0)
			e.ratioFailed.Store(0)
		}
	}
	calls = e.ratioCalls.Add(1)
	fails = e.ratioFailed.Load()
	if failed {
		fails = e.ratioFailed.Add(1)
	}
	return calls, fails
}
