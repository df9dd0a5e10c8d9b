package monitor

import "sync/atomic"

// Gauge is an in-flight call counter for one upstream. Inc and Dec are single
// atomic adds; the collector reads Value at scrape time.
type Gauge struct {
	v atomic.Int64
}

// Inc adds one call in flight.
func (g *Gauge) Inc() { g.v.Add(1) }

// Dec removes one call in flight.
func (g *Gauge) Dec() { g.v.Add(-1) }

// Value returns the number of calls in flight now.
func (g *Gauge) Value() int64 { return g.v.Load() }
