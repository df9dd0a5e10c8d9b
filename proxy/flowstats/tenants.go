// Package flowstats is flow control's accounting for /api/v1/flow and
// /metrics: the bounded table of tenants (their calls by band and
// outcome, their waits and latency), the gates' status, and the
// collector of both. The proxy counts each call at its gate into it and
// hands it the gates; it never sees a call.
package flowstats

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infergate/infergate/flow"
	"github.com/infergate/infergate/proxy/pool"
)

// Flow control's view per tenant and band: calls sent at once, after
// waiting, or refused; the time waited; and each tenant's recent latency
// (p50/p99 on /api/v1/flow). Tenant names are the clients', so they are
// bounded: a tenant gets series of its own once it has sent
// tenantPromoteAfter calls within tenantWindow while fewer than
// maxTenantSeries have them (the busiest come first); every other call
// counts under "other". A named tenant silent for tenantIdle gives its
// place up when another wants one, so over weeks the names follow who
// sends now, not who came first.
const (
	maxTenantSeries    = 20
	tenantPromoteAfter = 100
	maxTenantCandidate = 1000
	tenantWindow       = 10 * time.Minute
	tenantIdle         = 10 * time.Minute
)

// OtherTenant is the name the calls of tenants without series of their
// own count under, and that of a tenant whose name is too long to keep.
const OtherTenant = "other"

// Outcome is what became of a call at its gate.
type Outcome int

// Outcomes of a call at its gate.
const (
	AtOnce Outcome = iota
	Waited
	Refused
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"at_once", "waited", "refused"}

// tenantStat is one tenant's counts by band and outcome, its waits and
// its calls' latency.
type tenantStat struct {
	name string
	// last is when it last sent a call (Unix nanoseconds).
	last  atomic.Int64
	calls [flow.NumBands][numOutcomes]atomic.Uint64
	// waited sums the seconds its calls waited (nanoseconds), by band.
	waited [flow.NumBands]atomic.Int64
	lat    pool.RecentLatency // its answers' latency, last 10 to 20 s
}

// Tenants is the bounded table of tenants; the zero value is empty and
// ready.
type Tenants struct {
	mu         sync.Mutex
	named      atomic.Pointer[map[string]*tenantStat] // replaced whole
	other      tenantStat
	candidates map[string]int // calls of tenants not named yet, since candidatesFrom
	// candidatesFrom starts the candidates' window; sweptAt is when
	// idle named tenants were last looked for (Unix nanoseconds).
	candidatesFrom, sweptAt int64
}

// stat is the tenantStat a call of tenant at now (Unix nanoseconds)
// counts under.
func (ft *Tenants) stat(tenant string, now int64) *tenantStat {
	if m := ft.named.Load(); m != nil {
		if s := (*m)[tenant]; s != nil {
			s.seen(now)
			return s
		}
	}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	old := ft.named.Load()
	n := 0
	if old != nil {
		if s := (*old)[tenant]; s != nil {
			s.seen(now)
			return s
		}
		n = len(*old)
	}
	if n >= maxTenantSeries && now-ft.sweptAt >= int64(time.Second) {
		ft.sweptAt = now
		old = ft.dropIdle(old, now)
		n = len(*old)
	}
	if n >= maxTenantSeries {
		return &ft.other
	}
	if ft.candidates == nil || now-ft.candidatesFrom >= int64(tenantWindow) {
		ft.candidates, ft.candidatesFrom = map[string]int{}, now
	}
	c, ok := ft.candidates[tenant]
	if !ok && len(ft.candidates) >= maxTenantCandidate {
		return &ft.other
	}
	if c+1 < tenantPromoteAfter {
		ft.candidates[tenant] = c + 1
		return &ft.other
	}
	delete(ft.candidates, tenant)
	next := make(map[string]*tenantStat, n+1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	s := &tenantStat{name: tenant}
	s.last.Store(now)
	next[tenant] = s
	ft.named.Store(&next)
	return s
}

// seen notes a call of s at now. last is kept to the second (idleness is
// judged in minutes): a store on every call would bounce the line between
// the cores serving one busy tenant.
func (s *tenantStat) seen(now int64) {
	if now-s.last.Load() >= int64(time.Second) {
		s.last.Store(now)
	}
}

// dropIdle removes from named (the current table, not nil: full) the
// tenants silent for tenantIdle at now, and returns the table. Their
// series end; their counts are not moved to other, whose counters would
// jump. Lock held.
func (ft *Tenants) dropIdle(named *map[string]*tenantStat, now int64) *map[string]*tenantStat {
	next := make(map[string]*tenantStat, len(*named))
	for k, v := range *named {
		if now-v.last.Load() < int64(tenantIdle) {
			next[k] = v
		}
	}
	if len(next) == len(*named) {
		return named
	}
	ft.named.Store(&next)
	return &next
}

// all is every tenantStat with series, other last.
func (ft *Tenants) all() []*tenantStat {
	var out []*tenantStat
	if m := ft.named.Load(); m != nil {
		for _, s := range *m {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *tenantStat) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	ft.other.name = OtherTenant
	return append(out, &ft.other)
}

// Count records one call of c at its gate: outcome, its wait, and
// (answered, took > 0) its latency.
func (ft *Tenants) Count(c flow.Call, outcome Outcome, wait, took time.Duration) {
	now := time.Now().UnixNano()
	s := ft.stat(c.Tenant, now)
	s.calls[c.Band][outcome].Add(1)
	if wait > 0 {
		s.waited[c.Band].Add(int64(wait))
	}
	if took > 0 {
		s.lat.Add(now, took)
	}
}

// TenantStatus is one tenant on GET /api/v1/flow.
type TenantStatus struct {
	Tenant string `json:"tenant"`
	// Bands are its calls by band: at once, after waiting, refused,
	// and the seconds they waited.
	Bands map[string]TenantBand `json:"bands"`
	// Share is its share of the calls sent (at once or after waiting).
	Share float64 `json:"share"`
	// P50Seconds and P99Seconds are its calls' latency, waits included,
	// over the last 10 to 20 s; null without calls then.
	P50Seconds *float64 `json:"p50_seconds"`
	P99Seconds *float64 `json:"p99_seconds"`
}

// TenantBand is a tenant's calls in one band.
type TenantBand struct {
	AtOnce        uint64  `json:"at_once"`
	Waited        uint64  `json:"waited"`
	Refused       uint64  `json:"refused"`
	WaitedSeconds float64 `json:"waited_seconds"`
}

// Status returns the tenants' state, other last.
func (ft *Tenants) Status() []TenantStatus {
	all := ft.all()
	out := make([]TenantStatus, 0, len(all))
	var total uint64
	t := time.Now().UnixNano()
	for _, s := range all {
		ts := TenantStatus{Tenant: s.name, Bands: map[string]TenantBand{}}
		var sent uint64
		for b := range flow.NumBands {
			tb := TenantBand{AtOnce: s.calls[b][AtOnce].Load(), Waited: s.calls[b][Waited].Load(),
				Refused: s.calls[b][Refused].Load(), WaitedSeconds: time.Duration(s.waited[b].Load()).Seconds()}
			sent += tb.AtOnce + tb.Waited
			if tb != (TenantBand{}) {
				ts.Bands[flow.Band(b).String()] = tb
			}
		}
		ts.Share = float64(sent)
		total += sent
		if n, p50, p99 := s.lat.At(t); n > 0 {
			p50, p99 := p50.Seconds(), p99.Seconds()
			ts.P50Seconds, ts.P99Seconds = &p50, &p99
		}
		out = append(out, ts)
	}
	for i := range out {
		if total > 0 {
			out[i].Share /= float64(total)
		} else {
			out[i].Share = 0
		}
	}
	return out
}
