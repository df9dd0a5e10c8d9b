package batcher

import (
	"math"
	"time"
)

// latencyFit learns the upstream latency of a batch as a function of its
// size, L(n) = a + b·n, by least squares over recent batches. Each new batch
// multiplies the weight of the older ones by forget, so the fit follows a
// backend that slows down or recovers within a few dozen batches. Not safe
// for concurrent use; its queue's lock guards it.
type latencyFit struct {
	s0, sn, snn, sy, sny float64 // decayed sums of 1, n, n², y, n·y (y in seconds)
	a, b                 float64 // current fit, seconds and seconds per row
}

const (
	// fitForget is the weight kept by older batches at each new one: about
	// the last 30 batches count.
	fitForget = 0.97
	// fitMinWeight is the weight of evidence below which the fit is not
	// trusted (no clipping, no deadline predictions).
	fitMinWeight = 4
	// fitClip bounds one batch's latency at this multiple of the prediction,
	// so a rare long-tail execution does not drag the fit.
	fitClip = 3
)

// ready reports whether enough batches were seen to trust the fit.
func (f *latencyFit) ready() bool { return f.s0 >= fitMinWeight }

// predict returns L(n), 0 before any batch.
func (f *latencyFit) predict(n int) time.Duration {
	return time.Duration((f.a + f.b*float64(n)) * float64(time.Second))
}

// add takes one batch of n rows that took d.
func (f *latencyFit) add(n int, d time.Duration) {
	y := d.Seconds()
	x := float64(n)
	if f.ready() {
		y = min(y, fitClip*(f.a+f.b*x))
	}
	f.s0 = f.s0*fitForget + 1
	f.sn = f.sn*fitForget + x
	f.snn = f.snn*fitForget + x*x
	f.sy = f.sy*fitForget + y
	f.sny = f.sny*fitForget + x*y
	f.solve()
}

// solve refits a and b. With batch sizes that barely vary the slope is
// unknown; the fit then charges everything to the per-batch cost (b = 0),
// which keeps the target large until batch sizes vary and the slope shows.
func (f *latencyFit) solve() {
	mn, my := f.sn/f.s0, f.sy/f.s0
	varN := f.snn/f.s0 - mn*mn
	if varN < 0.25 {
		f.a, f.b = my, 0
		return
	}
	b := (f.sny/f.s0 - mn*my) / varN
	a := my - b*mn
	switch {
	case b < 0: // larger batches cannot be faster: noise
		a, b = my, 0
	case a < 0: // all cost is per row: fit through the origin
		a, b = 0, f.sny/f.snn
	}
	f.a, f.b = a, b
}

// rateMeter estimates the arrival rate with an exponentially decaying
// counter: each arrival adds 1/tau, and the sum decays with time constant
// tau. Not safe for concurrent use.
type rateMeter struct {
	rate float64 // per second, as of last
	last time.Time
}

// rateTau is the rate meter's time constant.
const rateTau = 500 * time.Millisecond

// at returns the rate at now.
func (m *rateMeter) at(now time.Time) float64 {
	if m.last.IsZero() {
		return 0
	}
	dt := max(now.Sub(m.last), 0)
	return m.rate * math.Exp(-float64(dt)/float64(rateTau))
}

// add counts one arrival at now.
func (m *rateMeter) add(now time.Time) {
	m.rate = m.at(now) + 1/rateTau.Seconds()
	m.last = now
}

// sloHeadroom is the share of the SLO the controller plans to use; the rest
// absorbs long-tail executions and the proxy's own time.
const sloHeadroom = 0.8

// stableHeadroom is how much more than the arrival rate the chosen batch
// size must be able to serve.
const stableHeadroom = 1.25

// adaptiveTarget returns the batch size the adaptive controller aims for:
// the largest n whose predicted request latency, one batch of wait per slot
// plus its own batch, (1 + 1/slots)·L(n), stays within sloHeadroom·SLO; but
// at least the n whose throughput, slots·n / L(n), serves stableHeadroom
// times the arrival rate, because a smaller batch would let the queue, and
// every request's latency, grow without bound. The result is in
// [1, maxSize]; before the fit is ready it is maxSize.
func adaptiveTarget(f *latencyFit, rate float64, slo time.Duration, slots, maxSize int) int {
	if f.s0 == 0 {
		return maxSize
	}
	s := float64(slots)
	budget := sloHeadroom * slo.Seconds() / (1 + 1/s)
	nSLO := float64(maxSize)
	if f.b > 0 {
		nSLO = (budget - f.a) / f.b
	} else if f.a > budget {
		nSLO = 1
	}
	nStable := 1.0
	if need := stableHeadroom * rate; need > 0 {
		if den := s - need*f.b; den > 0 {
			nStable = math.Ceil(need * f.a / den)
		} else {
			nStable = float64(maxSize)
		}
	}
	n := max(math.Floor(nSLO), nStable)
	return int(min(max(n, 1), float64(maxSize)))
}
