package scenario

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"google.golang.org/grpc/codes"
)

// The failover analysis is pure: it reads recorded calls and the fault
// schedule, so it is tested on synthetic runs (failover_test.go) without
// processes, and a recorded run can be analysed again.

// Routes of a successful call.
const (
	RoutePrimary  = "primary"
	RouteFallback = "fallback"
)

// Outcome names of successful calls; failed calls are named by their gRPC
// code ("Unavailable", "DeadlineExceeded", ...).
const (
	OutcomeOKPrimary  = "ok_primary"
	OutcomeOKFallback = "ok_fallback"
)

// FailoverBucket is the width of the buckets of intended send time in which
// routes are counted (time to fallback, time to return, majority route).
const FailoverBucket = 0.1 // s

// FailoverShare is the share of a bucket's calls that must be answered by
// a route for the bucket to count as on it.
const FailoverShare = 0.99

// FailoverCall is one call of the run.
type FailoverCall struct {
	// At is the intended send time, seconds since the load started.
	At float64 `json:"t_s"`
	// Latency is measured from the intended send time (ms).
	Latency float64 `json:"latency_ms"`
	// Code is the call's gRPC status.
	Code codes.Code `json:"code"`
	// Route says who answered an OK call: RoutePrimary or RouteFallback;
	// empty for a failed call.
	Route string `json:"route,omitempty"`
}

// Outcome names the call's outcome: OutcomeOKPrimary, OutcomeOKFallback,
// or its gRPC code's name.
func (c FailoverCall) Outcome() string {
	if c.Code != codes.OK {
		return c.Code.String()
	}
	if c.Route == RouteFallback {
		return OutcomeOKFallback
	}
	return OutcomeOKPrimary
}

// FailoverWindow is one fault of the schedule, in seconds since the load
// started: injected at Injected, healed at Healed (the primary restarted,
// for the kill), and judged until End (Healed + the recovery period).
type FailoverWindow struct {
	Kind     string  `json:"kind"`
	What     string  `json:"what"`
	Injected float64 `json:"injected_at_s"`
	Healed   float64 `json:"healed_at_s"`
	End      float64 `json:"end_s"`
}

// failoverAccount counts the calls by outcome and checks that sent calls
// and recorded outcomes agree: every call sent has exactly one outcome, and
// every OK call has a known route.
func failoverAccount(sent int64, calls []FailoverCall) (map[string]int64, error) {
	out := map[string]int64{}
	var errs []error
	bad := 0
	for _, c := range calls {
		if c.Code == codes.OK && c.Route != RoutePrimary && c.Route != RouteFallback {
			bad++
		}
		out[c.Outcome()]++
	}
	if bad > 0 {
		errs = append(errs, fmt.Errorf("%d OK calls without a route", bad))
	}
	var sum int64
	for _, n := range out {
		sum += n
	}
	if sum != sent {
		errs = append(errs, fmt.Errorf("%d calls sent, %d outcomes recorded: %d unaccounted for", sent, sum, sent-sum))
	}
	return out, errors.Join(errs...)
}

// routeBucket counts the calls intended in one bucket.
type routeBucket struct {
	n, primary, fallback, failed int
}

// FailoverClearMajority is the share of a bucket's OK calls one route
// must have for the bucket to count as on that route when flips are
// counted. Between the two (a slow start crossing the middle, where a
// bucket of 20 calls splits 11:9 one way and 9:11 the next by chance) a
// bucket keeps the route before it: a flip is a change from one clear
// majority to the other, not noise around half.
const FailoverClearMajority = 2.0 / 3

// majority is the route that at least FailoverClearMajority of the
// bucket's OK calls took; "" when no call succeeded or neither route has
// such a majority.
func (b routeBucket) majority() string {
	ok := float64(b.primary + b.fallback)
	switch {
	case ok == 0:
	case float64(b.primary) >= FailoverClearMajority*ok:
		return RoutePrimary
	case float64(b.fallback) >= FailoverClearMajority*ok:
		return RouteFallback
	}
	return ""
}

// on reports whether at least FailoverShare of the bucket's calls (failed
// ones included) were answered by route.
func (b routeBucket) on(route string) bool {
	if b.n == 0 {
		return false
	}
	k := b.primary
	if route == RouteFallback {
		k = b.fallback
	}
	return float64(k) >= FailoverShare*float64(b.n)-1e-9
}

// routeBuckets counts the calls intended in [from, to) in buckets of width
// seconds aligned on from (an injection or heal), so the first bucket
// starts at the event.
func routeBuckets(calls []FailoverCall, from, to, width float64) []routeBucket {
	if !(to > from) {
		return nil
	}
	bs := make([]routeBucket, int(math.Ceil((to-from)/width-1e-9)))
	for _, c := range calls {
		if c.At < from || c.At >= to {
			continue
		}
		// The epsilon keeps a call intended exactly on a boundary in the
		// later bucket despite rounding ((5.3-5)/0.1 = 2.9999...).
		k := min(int((c.At-from)/width+1e-9), len(bs)-1)
		b := &bs[k]
		b.n++
		switch {
		case c.Code != codes.OK:
			b.failed++
		case c.Route == RouteFallback:
			b.fallback++
		default:
			b.primary++
		}
	}
	return bs
}

// timeToRoute returns the time from the start of the buckets to the end of
// the first bucket on route (see routeBucket.on), or -1 when none is. With
// stay, the bucket must also begin a run of buckets on route to the last
// one (empty buckets neither break nor start the run).
func timeToRoute(bs []routeBucket, route string, width float64, stay bool) float64 {
	if !stay {
		for k, b := range bs {
			if b.on(route) {
				return float64(k+1) * width
			}
		}
		return -1
	}
	first := -1
	for k, b := range bs {
		switch {
		case b.n == 0:
		case b.on(route):
			if first < 0 {
				first = k
			}
		default:
			first = -1
		}
	}
	if first < 0 {
		return -1
	}
	return float64(first+1) * width
}

// majorityChanges counts the changes of the majority route between
// consecutive buckets, starting from route start (the primary before a
// fault). Buckets without a clear majority (no OK call, or a split closer
// than FailoverClearMajority) keep the one before them.
func majorityChanges(bs []routeBucket, start string) int {
	cur, n := start, 0
	for _, b := range bs {
		if m := b.majority(); m != "" && m != cur {
			n++
			cur = m
		}
	}
	return n
}

// FailoverCleanChanges is the number of majority-route changes of a clean
// fault: over to the fallback, and back to the primary.
const FailoverCleanChanges = 2

// extraFlips is the number of majority-route changes beyond a clean fault's
// two (never negative): a fault that fell over, came back for a while, fell
// over again and returned has 4 changes, 2 extra flips.
func extraFlips(changes int) int { return max(0, changes-FailoverCleanChanges) }

// quantile returns the q quantile (0..1) of vs by the nearest-rank method,
// or NaN when vs is empty. vs is sorted in place.
func quantile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	sort.Float64s(vs)
	k := int(math.Ceil(q*float64(len(vs)))) - 1
	return vs[min(max(k, 0), len(vs)-1)]
}

// FailoverFaultStats is the analysis of one fault window.
type FailoverFaultStats struct {
	// ToFallback is the time from the injection to the end of the first
	// 100 ms bucket with >= 99% of its calls answered by the fallback
	// (seconds; -1: never before the heal).
	ToFallback float64 `json:"to_fallback_s"`
	// ToPrimary is the time from the heal to the end of the first bucket
	// from which every bucket to the end of the recovery has >= 99% of its
	// calls answered by the primary (seconds; -1: not back, or not staying).
	ToPrimary float64 `json:"to_primary_s"`
	// Calls, Failed and Errors cover the fault and its recovery.
	Calls  int64            `json:"calls"`
	Failed int64            `json:"failed"`
	Errors map[string]int64 `json:"errors,omitempty"`
	// FallbackShare is the share of the calls intended during the fault
	// (injection to heal) that the fallback answered.
	FallbackShare float64 `json:"fallback_share"`
	// P99 is over every call intended during the fault, failed ones at
	// their latency (at most the deadline), from intended send times (ms).
	P99 float64 `json:"p99_ms"`
	// Changes counts majority-route changes between consecutive buckets
	// from the injection to the end of the recovery, starting on the
	// primary; ExtraFlips those beyond a clean fault's two.
	Changes    int `json:"route_changes"`
	ExtraFlips int `json:"extra_flips"`
}

// analyzeFault computes the stats of one window from all the run's calls.
func analyzeFault(calls []FailoverCall, w FailoverWindow) FailoverFaultStats {
	s := FailoverFaultStats{Errors: map[string]int64{}}
	var lat []float64
	fallback, during := 0, 0
	for _, c := range calls {
		if c.At < w.Injected || c.At >= w.End {
			continue
		}
		s.Calls++
		if c.Code != codes.OK {
			s.Failed++
			s.Errors[c.Code.String()]++
		}
		if c.At < w.Healed {
			during++
			lat = append(lat, c.Latency)
			if c.Code == codes.OK && c.Route == RouteFallback {
				fallback++
			}
		}
	}
	if len(s.Errors) == 0 {
		s.Errors = nil
	}
	if during > 0 {
		s.FallbackShare = float64(fallback) / float64(during)
	}
	s.P99 = zeroIfNaN(quantile(lat, 0.99)) // JSON has no NaN
	s.ToFallback = timeToRoute(routeBuckets(calls, w.Injected, w.Healed, FailoverBucket), RouteFallback, FailoverBucket, false)
	// A call still in flight at the end of the recovery may have met the
	// next fault (a dropped connection sends it to the fallback): it says
	// nothing of this fault's return. It is counted above all the same.
	done := slices.DeleteFunc(slices.Clone(calls), func(c FailoverCall) bool { return c.At+c.Latency/1000 > w.End })
	s.ToPrimary = timeToRoute(routeBuckets(done, w.Healed, w.End, FailoverBucket), RoutePrimary, FailoverBucket, true)
	s.Changes = majorityChanges(routeBuckets(done, w.Injected, w.End, FailoverBucket), RoutePrimary)
	s.ExtraFlips = extraFlips(s.Changes)
	return s
}

func zeroIfNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// FailoverSecond is one second of the run by intended send time: calls,
// their outcomes, the p99 of all of them (failed ones at their latency)
// and the share the fallback answered.
type FailoverSecond struct {
	At            float64 `json:"t_s"`
	Calls         int     `json:"calls"`
	OKPrimary     int     `json:"ok_primary"`
	OKFallback    int     `json:"ok_fallback"`
	Failed        int     `json:"failed"`
	P99           float64 `json:"p99_ms"`
	FallbackShare float64 `json:"fallback_share"`
}

// failoverSeconds bins the calls by second of intended send time.
func failoverSeconds(calls []FailoverCall) []FailoverSecond {
	if len(calls) == 0 {
		return nil
	}
	last := 0
	for _, c := range calls {
		last = max(last, int(c.At))
	}
	secs := make([]FailoverSecond, last+1)
	lats := make([][]float64, last+1)
	for _, c := range calls {
		k := max(int(c.At), 0)
		s := &secs[k]
		s.Calls++
		switch {
		case c.Code != codes.OK:
			s.Failed++
		case c.Route == RouteFallback:
			s.OKFallback++
		default:
			s.OKPrimary++
		}
		lats[k] = append(lats[k], c.Latency)
	}
	out := secs[:0]
	for k := range secs {
		s := secs[k]
		if s.Calls == 0 {
			continue
		}
		s.At = float64(k)
		s.P99 = quantile(lats[k], 0.99)
		s.FallbackShare = float64(s.OKFallback) / float64(s.Calls)
		out = append(out, s)
	}
	return slices.Clip(out)
}
