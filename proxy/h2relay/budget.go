package h2relay

import (
	"google.golang.org/grpc/codes"

	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is the one bound on the bytes the relay holds for calls: a
// request read whole is held from its first DATA until its call ended.
// A stream takes its whole message's size (the gRPC length prefix says it)
// before it gets the window to send more than the initial window, so what
// the relay holds can never pass the budget, and a stream that got its
// share always completes (no two half-read requests can wait on each
// other's room). When the budget is spent the stream waits, first come
// first served, with the window it had: its sender waits too, and nothing
// fails. Only a stream still waiting at its deadline (or maxBudgetWait) is
// refused, with RESOURCE_EXHAUSTED naming the budget.
//
// Envoy's per-connection buffer limits bound one connection with
// watermarks and its overload manager the process; here both are one
// ledger: a connection may hold at most half the budget, so one client
// cannot take all of it.
//
// The proxy's gRPC path (calls grpc-go's server reads: the fast path off,
// or calls the relay hands on) shares the same budget through Claims
// (Admit): see claim.go.
type Budget struct {
	limit, connShare int64

	mu      sync.Mutex
	held    int64
	waiting []*stream // in arrival order
	claims  claimQueue

	heldNow  atomic.Int64 // held, for metrics without the lock
	waits    atomic.Int64
	refusals atomic.Int64
}

// maxBudgetWait bounds how long a stream without a deadline waits for
// room: past it, the proxy's answer is more use to its client than more
// waiting.
const maxBudgetWait = 30 * time.Second

// NewBudget returns a budget of limit bytes (64 MiB when not positive),
// for Options.Budget: one budget for the relay and the gRPC path.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		limit = 64 << 20
	}
	b := &Budget{limit: limit, connShare: limit / 2}
	b.claims.est = initialClaimEstimate
	return b
}

// BudgetStats is what the relay's byte budget holds and has done.
type BudgetStats struct {
	// Limit is the budget; Held what calls hold of it now.
	Limit, Held int64
	// Waits counts requests that waited for room; Refusals those refused
	// because none came before their deadline.
	Waits, Refusals int64
}

// BudgetStats returns the budget's figures; safe for concurrent use.
func (s *Server) BudgetStats() BudgetStats { return s.budget.Stats() }

// Stats returns the budget's figures; safe for concurrent use.
func (b *Budget) Stats() BudgetStats {
	return BudgetStats{Limit: b.limit, Held: b.heldNow.Load(), Waits: b.waits.Load(), Refusals: b.refusals.Load()}
}

// reserve takes n bytes for s, or queues s and reports false: s is
// admitted (admit) when room comes, or refused at its wait's end.
func (b *Budget) reserve(s *stream, n int64) bool {
	cc := s.cc
	b.mu.Lock()
	if !b.queueBlockedLocked() && b.fitsLocked(cc, n) {
		b.takeLocked(cc, n)
		s.reserved = n
		b.mu.Unlock()
		return true
	}
	s.want = n
	b.waiting = append(b.waiting, s)
	b.mu.Unlock()
	b.waits.Add(1)
	wait := maxBudgetWait
	if !s.call.Deadline.IsZero() {
		wait = min(wait, time.Until(s.call.Deadline))
	}
	s.mu.Lock()
	s.waitTimer = time.AfterFunc(max(wait, 0), func() { b.expire(s, n) })
	s.mu.Unlock()
	return false
}

// queueBlockedLocked says whether a stream waits for the budget itself
// (not for its connection's share): then newcomers queue behind it.
func (b *Budget) queueBlockedLocked() bool {
	for _, x := range b.waiting {
		if b.held+x.want > b.limit {
			return true
		}
	}
	return false
}

func (b *Budget) fitsLocked(cc *clientConn, n int64) bool {
	return b.held+n <= b.limit && cc.reserved+n <= b.connShare
}

func (b *Budget) takeLocked(cc *clientConn, n int64) {
	b.held += n
	cc.reserved += n
	b.heldNow.Store(b.held)
}

// release gives back what s holds and admits the streams waiting that
// now fit, in order.
func (b *Budget) release(s *stream) {
	b.mu.Lock()
	n := s.reserved
	if n > 0 {
		s.reserved = 0
		b.held -= n
		s.cc.reserved -= n
		b.heldNow.Store(b.held)
	}
	if s.want > 0 {
		b.dropLocked(s)
	}
	admitted := b.admitLocked()
	b.wakeClaimsLocked()
	b.mu.Unlock()
	for _, a := range admitted {
		a.s.admit(a.n)
	}
}

// admission is a waiting stream the budget took room for.
type admission struct {
	s *stream
	n int64
}

// admitLocked takes room for the waiting streams that now fit.
func (b *Budget) admitLocked() []admission {
	var admitted []admission
	keep := b.waiting[:0]
	blocked := false
	for _, x := range b.waiting {
		// First come, first served for the budget: once one waits for
		// room, those behind it do too; a stream held back by its own
		// connection's share holds back no one else.
		if !blocked && b.fitsLocked(x.cc, x.want) {
			b.takeLocked(x.cc, x.want)
			admitted = append(admitted, admission{x, x.want})
			x.reserved, x.want = x.want, 0
			continue
		}
		if b.held+x.want > b.limit {
			blocked = true
		}
		keep = append(keep, x)
	}
	clear(b.waiting[len(keep):])
	b.waiting = keep
	return admitted
}

// tryTake takes n bytes for a window that widens, if they are free and
// nobody waits for them; it never waits.
func (b *Budget) tryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiting) > 0 || len(b.claims.waiting) > 0 || b.held+n > b.limit {
		return false
	}
	b.held += n
	b.heldNow.Store(b.held)
	return true
}

// giveBack returns n bytes tryTake took. It runs under a connection's
// lock, so streams it makes room for are admitted on a goroutine of
// their own (admitting takes connection locks).
func (b *Budget) giveBack(n int64) {
	b.mu.Lock()
	b.held -= n
	b.heldNow.Store(b.held)
	var admitted []admission
	if len(b.waiting) > 0 {
		admitted = b.admitLocked()
	}
	b.wakeClaimsLocked()
	b.mu.Unlock()
	if len(admitted) > 0 {
		go func() {
			for _, a := range admitted {
				a.s.admit(a.n)
			}
		}()
	}
}

func (b *Budget) dropLocked(s *stream) {
	for i, x := range b.waiting {
		if x == s {
			b.waiting = append(b.waiting[:i], b.waiting[i+1:]...)
			break
		}
	}
	s.want = 0
}

// expire refuses s, waiting for n bytes, if it is still waiting.
func (b *Budget) expire(s *stream, n int64) {
	b.mu.Lock()
	waiting := s.want > 0
	if waiting {
		b.dropLocked(s)
	}
	b.mu.Unlock()
	if !waiting {
		return
	}
	b.refusals.Add(1)
	var w writes
	s.refuse(codes.ResourceExhausted, fmt.Sprintf("infergate: no room in the proxy's buffer budget (%d bytes, --max-buffered-bytes) for this request's %d bytes before its deadline", b.limit, n), &w)
	w.flush()
}
