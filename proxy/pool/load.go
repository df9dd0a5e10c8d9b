package pool

import (
	"math"
	"sync/atomic"
	"time"
)

// callLoad is what the picker weighs of an endpoint, as tower's PeakEwma
// keeps it: its calls in flight and a peak EWMA of the latency
// infergate measured of its answers.
type callLoad struct {
	// inFlight counts its calls in progress, on both paths.
	inFlight atomic.Int64
	// cost is its peak EWMA of call latency, in nanoseconds (float64
	// bits); stamp when it was last updated (unix nanoseconds).
	cost, stamp atomic.Uint64
}

// costDecay is the time constant of the latency EWMA: Finagle's peak EWMA
// default. A slower answer than the current cost is taken at once (the
// peak); faster ones pull it down over about this long, so a replica that
// became slow is avoided at its first slow answer and tried again as its
// cost decays.
const costDecay = 10 * time.Second

// peakStep is the most one answer raises an endpoint's cost by: a
// factor. One slow answer is one sample, and on a busy machine a replica
// of a sub-millisecond model answers one call in a hundred ten or fifty
// times slower (a pause, a descheduled process): taken whole, such a
// peak kept every call off the replica for the 10 to 30 s its cost took
// to decay, and a replica without calls goes cold and answers slower
// still. A replica that really became slower reaches its cost in a few
// answers (4x in two).
const peakStep = 2.0

// minPull is the least share of the way to its latency that one answer
// faster than an endpoint's cost pulls the cost down by. Decayed by time
// alone (costDecay), a replica answering a hundred calls a second took
// about ten seconds to forget one slow answer (a pause, a call that
// waited behind another): its cost sat near the slowest of its last
// thousand answers. In a healthy pool of 5 ms replicas on a busy machine
// the costs read 15 to 78 ms where the answers took 7.5 ms at the
// median, and wandered two or three times apart, so the picker sent
// calls behind busy replicas; and a replica 4x slower did not stand out
// from the others' inflated costs. With it, a slow answer is forgotten
// over some twenty answers; a replica that is slow answers above its
// cost every time, and one that answers nothing decays by time as
// before.
const minPull = 0.05

// observe folds one call's latency into the cost.
func (e *callLoad) observe(now time.Time, took time.Duration) {
	rtt := float64(took)
	t := uint64(now.UnixNano())
	for {
		oldBits := e.cost.Load()
		old := math.Float64frombits(oldBits)
		last := e.stamp.Load()
		next := rtt
		if old > 0 && rtt > peakStep*old {
			next = peakStep * old
		}
		if old > 0 && rtt < old {
			td := float64(int64(t - last))
			if int64(t-last) < 0 {
				td = 0
			}
			w := math.Exp(-td / float64(costDecay))
			if rtt >= costFloor {
				// An answer above the picker's floor makes a peak be
				// forgotten over some twenty answers; under it latency
				// is noise the floor hides, and time alone decays the
				// cost (a replica of a sub-millisecond model tracked
				// answer by answer lost its share while it warmed).
				w = min(w, 1-minPull)
			}
			next = old*w + rtt*(1-w)
		}
		if e.cost.CompareAndSwap(oldBits, math.Float64bits(next)) {
			e.stamp.Store(t)
			return
		}
	}
}

// observeAtLeast raises the endpoint's cost to took, a latency it is known
// to exceed, when took is above its cost now (decayed); a lower bound
// under the cost says nothing.
func (e *callLoad) observeAtLeast(now time.Time, took time.Duration) {
	t := now.UnixNano()
	for {
		oldBits := e.cost.Load()
		if float64(took) <= e.costAt(t) {
			return
		}
		if e.cost.CompareAndSwap(oldBits, math.Float64bits(float64(took))) {
			e.stamp.Store(uint64(t))
			return
		}
	}
}

// costAt is the endpoint's latency cost at now: its peak EWMA, decayed
// for the time since its last answer as if answers since had been
// instant (Finagle's peak EWMA), so a replica that got no calls because it
// was slow is tried again after a while; 0 when never measured.
func (e *callLoad) costAt(now int64) float64 {
	c := math.Float64frombits(e.cost.Load())
	if c <= 0 {
		return 0
	}
	if td := now - int64(e.stamp.Load()); td > 0 {
		c *= math.Exp(-float64(td) / float64(costDecay))
	}
	return c
}
