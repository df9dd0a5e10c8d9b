package route

import (
	"sync/atomic"
	"time"
)

// BudgetConfig bounds retries and hedges, the way Finagle's and gRPC's
// retry throttling do: a second try is made only while it is a small share
// of the traffic, so a struggling fleet never sees its load doubled.
type BudgetConfig struct {
	// Ratio is the share of first tries that may be retried or hedged.
	// Default 0.2; negative turns retries and hedges off.
	Ratio float64
	// MinPerSecond is a floor of second tries allowed each second whatever
	// the traffic, so a quiet model can still be hedged. Default 10.
	MinPerSecond int
}

func (c BudgetConfig) WithDefaults() BudgetConfig {
	if c.Ratio == 0 {
		c.Ratio = 0.2
	}
	if c.MinPerSecond <= 0 {
		c.MinPerSecond = 10
	}
	return c
}

// RetryBudget is a token bucket in thousandths of a token: every first try
// deposits Ratio tokens, every second try takes one, and the floor refills
// MinPerSecond tokens a second. The bucket holds at most what ten seconds
// of the floor or of deposits give, so a burst after a quiet hour is
// bounded too.
type RetryBudget struct {
	cfg        BudgetConfig // with defaults: Apply keeps a budget whose settings did not change
	ratioMilli int64        // deposit per first try
	floorMilli int64        // refill per second
	capMilli   atomic.Int64
	tokens     atomic.Int64
	lastSec    atomic.Int64
	now        func() time.Time

	deposits atomic.Int64 // first tries this second, to size the cap
	denied   atomic.Uint64
}

// NewRetryBudget is a full budget of c (defaults filled) on the clock now.
func NewRetryBudget(c BudgetConfig, now func() time.Time) *RetryBudget {
	c = c.WithDefaults()
	b := &RetryBudget{cfg: c, now: now, floorMilli: int64(c.MinPerSecond) * 1000}
	if c.Ratio > 0 {
		b.ratioMilli = int64(c.Ratio * 1000)
	}
	b.capMilli.Store(10 * b.floorMilli)
	b.tokens.Store(10 * b.floorMilli)
	b.lastSec.Store(now().Unix())
	return b
}

// deposit counts a first try.
func (b *RetryBudget) Deposit() {
	if b.ratioMilli == 0 {
		return
	}
	b.refill()
	b.deposits.Add(1)
	b.add(b.ratioMilli)
}

// take spends one token for a second try; false when none is left (or
// the budget is off).
func (b *RetryBudget) Take() bool {
	if b.ratioMilli == 0 {
		return false
	}
	b.refill()
	for {
		t := b.tokens.Load()
		if t < 1000 {
			b.denied.Add(1)
			return false
		}
		if b.tokens.CompareAndSwap(t, t-1000) {
			return true
		}
	}
}

// add puts n thousandths in, up to the cap.
func (b *RetryBudget) add(n int64) {
	for {
		t := b.tokens.Load()
		c := b.capMilli.Load()
		if t >= c {
			return
		}
		if b.tokens.CompareAndSwap(t, min(t+n, c)) {
			return
		}
	}
}

// refill adds the floor once per elapsed second and resizes the cap to ten
// seconds of the last second's deposits.
func (b *RetryBudget) refill() {
	sec := b.now().Unix()
	last := b.lastSec.Load()
	if sec <= last || !b.lastSec.CompareAndSwap(last, sec) {
		return
	}
	perSec := b.deposits.Swap(0) * b.ratioMilli
	b.capMilli.Store(10 * max(b.floorMilli, perSec))
	b.add(min(sec-last, 10) * b.floorMilli)
}

// Config is the budget's settings, defaults filled.
func (b *RetryBudget) Config() BudgetConfig { return b.cfg }

// Denied counts the second tries the budget refused.
func (b *RetryBudget) Denied() uint64 { return b.denied.Load() }
