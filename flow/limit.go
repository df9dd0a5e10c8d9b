package flow

import (
	"sync"
	"time"
)

// Limiter learns how many calls one replica can have in flight for one
// model before its latency rises above its no-load latency: TCP Vegas's
// rule, as Netflix's concurrency-limits applies it to servers. The calls
// over the limit wait here, in the order the Gate decides, instead of in
// the model server's own queue, where the first caller through the door
// wins.
//
// The no-load latency is the least latency of answers sent while no other
// call of the model was in flight there (queueing only adds to a call's
// latency). Under load none is, so every probeEvery the limit drops to
// one for probeAnswers answers and their least latency replaces it, as
// Envoy's adaptive concurrency filter pins its concurrency to measure its
// minimum round trip: a replica that became slower is learnt, and the
// limit cannot creep up on a stale estimate.
//
// Every sample window (as many answers as the limit, at least ten), the
// queue the replica holds is estimated as limit × (1 −
// noLoad/rtt), rtt the window's mean latency: under alpha (half a call)
// queued there, the limit grows by one (when at least half the window's
// answers were sent at the limit: a limit used now and then is no
// evidence it could be higher, as Netflix's limits skip an app-limited
// window); over beta (one and a half), it shrinks by one. (Growing on
// any answer at the limit, a one-slot model whose gate keeps a slot for
// critical calls grew to three: the standard calls alone then never
// filled two, the latency said there was room, and a critical call
// waited behind one more of them queued at the replica.) A model with k slots settles at k + 1: its
// slots busy and one call queued there, whose estimate is one, between
// the two; at k + 2 the estimate is two, over beta. (With the thresholds
// at one and two, noise let a one-slot model drift to three and stay, two
// calls queued at the replica ahead of any critical one.)
type Limiter struct {
	mu    sync.Mutex
	limit int
	// The current sample window: its answers, their summed latency, and
	// how many of them were sent with the limit reached.
	n       int
	sum     time.Duration
	reached int
	noLoad  time.Duration
	// A probe of the no-load latency: in progress, its answers so far and
	// their least latency; when the last one ended.
	probing   bool
	probeSeen int
	probeMin  time.Duration
	lastProbe time.Time
}

// The Vegas thresholds, in calls queued at the replica; the bounds of a
// limit; the probe of the no-load latency.
const (
	alpha        = 0.5
	beta         = 1.5
	MinLimit     = 1
	MaxLimit     = 1000
	probeEvery   = 30 * time.Second
	probeAnswers = 5
	// windowAnswers is the least answers a sample window takes: a
	// mean over two or three noisy answers moved the limit on noise.
	windowAnswers = 10
)

// NewLimiter is a limiter at MinLimit: it grows from the first answers,
// the first of which measure the no-load latency.
func NewLimiter(now time.Time) *Limiter { return &Limiter{limit: MinLimit, lastProbe: now} }

// Limit is how many calls may be in flight now.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.probing {
		return MinLimit
	}
	return l.limit
}

// NoLoad is the estimate of the replica's latency without a queue; 0
// before its first answer sent alone.
func (l *Limiter) NoLoad() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.noLoad
}

// Observe takes one answer that took rtt, sent when inFlight calls of
// the model were in flight on the replica (itself included).
func (l *Limiter) Observe(now time.Time, rtt time.Duration, inFlight int) {
	rtt = max(rtt, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	alone := inFlight <= 1
	switch {
	case l.probing && alone:
		if l.probeMin == 0 || rtt < l.probeMin {
			l.probeMin = rtt
		}
		if l.probeSeen++; l.probeSeen >= probeAnswers {
			l.noLoad, l.probing, l.lastProbe = l.probeMin, false, now
			l.n, l.sum, l.reached = 0, 0, 0
		}
		return
	case l.probing:
		return // sent before the probe began
	case alone && (l.noLoad == 0 || rtt < l.noLoad):
		l.noLoad = rtt
	}
	if now.Sub(l.lastProbe) >= probeEvery && l.noLoad > 0 {
		l.probing, l.probeSeen, l.probeMin = true, 0, 0
		return
	}
	if l.noLoad == 0 {
		return
	}
	l.n++
	l.sum += rtt
	if inFlight >= l.limit {
		l.reached++
	}
	if l.n < max(l.limit, windowAnswers) {
		return
	}
	mean := l.sum / time.Duration(l.n)
	queued := float64(l.limit) * (1 - float64(l.noLoad)/float64(mean))
	switch {
	case queued < alpha && 2*l.reached >= l.n:
		l.limit = min(l.limit+1, MaxLimit)
	case queued > beta:
		l.limit = max(l.limit-1, MinLimit)
	}
	l.n, l.sum, l.reached = 0, 0, 0
}
