// Package budget is the one bound on the bytes the proxy holds for calls,
// on both of its paths: requests the relay reads whole (Reserve) and
// calls grpc-go's server reads (Admit, Claim), with their answers.
//
// A relayed request takes its whole message's size (the gRPC length prefix
// says it) before it gets the window to send more than the initial
// window, so what the relay holds can never pass the budget, and a request
// that got its share always completes (no two half-read requests can wait
// on each other's room). When the budget is spent the request waits,
// first come first served, with the window it had: its sender waits too,
// and nothing fails. Only a request still waiting at its deadline (or
// MaxWait) is refused, with an *Error naming the budget.
//
// Envoy's per-connection buffer limits bound one connection with
// watermarks and its overload manager the process; here both are one
// ledger: a connection (a Share) may hold at most half the budget, so one
// client cannot take all of it.
package budget

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is the ledger. Its zero value is not usable: make one with New.
type Budget struct {
	limit, connShare int64

	mu      sync.Mutex
	held    int64
	waiting []*Reservation // in arrival order
	claims  claimQueue

	heldNow  atomic.Int64 // held, for metrics without the lock
	waits    atomic.Int64
	refusals atomic.Int64
}

// MaxWait bounds how long a request without a deadline waits for room:
// past it, the proxy's answer is more use to its client than more
// waiting.
const MaxWait = 30 * time.Second

// DefaultLimit is the budget New gives for a limit that is not positive.
const DefaultLimit = 64 << 20

// New returns a budget of limit bytes (DefaultLimit when not positive).
func New(limit int64) *Budget {
	if limit <= 0 {
		limit = DefaultLimit
	}
	b := &Budget{limit: limit, connShare: limit / 2}
	b.claims.est = initialClaimEstimate
	return b
}

// Stats is what the budget holds and has done.
type Stats struct {
	// Limit is the budget; Held what calls hold of it now.
	Limit, Held int64
	// Waits counts requests that waited for room; Refusals those refused
	// because none came before their deadline.
	Waits, Refusals int64
}

// Stats returns the budget's figures; safe for concurrent use.
func (b *Budget) Stats() Stats {
	return Stats{Limit: b.limit, Held: b.heldNow.Load(), Waits: b.waits.Load(), Refusals: b.refusals.Load()}
}

// Limit returns the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Error is the error of a request that waited for room until its
// deadline (or MaxWait) passed. Size is the request's size when it was
// known (a relayed request), 0 otherwise.
type Error struct{ Limit, Size int64 }

func (e *Error) Error() string {
	if e.Size > 0 {
		return fmt.Sprintf("infergate: no room in the proxy's buffer budget (%d bytes, --max-buffered-bytes) for this request's %d bytes before its deadline", e.Limit, e.Size)
	}
	return fmt.Sprintf("no room in the proxy's buffer budget (%d bytes, --max-buffered-bytes) for this request before its deadline", e.Limit)
}

// Share is one connection's part of the budget: its requests together
// hold at most half of it. The zero value is ready; it is guarded by the
// budget's lock.
type Share struct{ reserved int64 }

// Waiter is told how a Reservation's wait ended: once, on a goroutine
// that holds none of the budget's locks.
type Waiter interface {
	// Admitted: the budget took n bytes for the request.
	Admitted(n int64)
	// Refused: no room came before the request's deadline.
	Refused(err *Error)
}

// Reservation is one relayed request's hold on the budget, kept in the
// request's own state (the zero value is ready). Release it when the
// request ends, whatever Reserve returned.
type Reservation struct {
	w              Waiter
	share          *Share
	reserved, want int64
	timer          *time.Timer
}

// Reserve takes n bytes for r, a request of the connection share, and
// reports true; or queues r and reports false: w is then told when room
// comes (Admitted) or when the wait reaches deadline or MaxWait
// (Refused).
func (b *Budget) Reserve(r *Reservation, w Waiter, share *Share, n int64, deadline time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r.w, r.share = w, share
	if !b.queueBlockedLocked() && b.fitsLocked(share, n) {
		b.takeLocked(share, n)
		r.reserved = n
		return true
	}
	r.want = n
	b.waiting = append(b.waiting, r)
	b.waits.Add(1)
	wait := MaxWait
	if !deadline.IsZero() {
		wait = min(wait, time.Until(deadline))
	}
	r.timer = time.AfterFunc(max(wait, 0), func() { b.expire(r, n) })
	return false
}

// queueBlockedLocked says whether a request waits for the budget itself
// (not for its connection's share): then newcomers queue behind it.
func (b *Budget) queueBlockedLocked() bool {
	for _, x := range b.waiting {
		if b.held+x.want > b.limit {
			return true
		}
	}
	return false
}

func (b *Budget) fitsLocked(share *Share, n int64) bool {
	return b.held+n <= b.limit && share.reserved+n <= b.connShare
}

func (b *Budget) takeLocked(share *Share, n int64) {
	b.held += n
	share.reserved += n
	b.heldNow.Store(b.held)
}

// Release gives back what r holds, or ends its wait, and admits the
// requests waiting that now fit, in order.
func (b *Budget) Release(r *Reservation) {
	b.mu.Lock()
	if n := r.reserved; n > 0 {
		r.reserved = 0
		b.held -= n
		r.share.reserved -= n
		b.heldNow.Store(b.held)
	}
	if r.want > 0 {
		b.dropLocked(r)
	}
	admitted := b.admitLocked()
	b.wakeClaimsLocked()
	b.mu.Unlock()
	admitted.tell()
}

// admission is a waiting request the budget took room for.
type admission struct {
	w Waiter
	n int64
}

type admissions []admission

func (as admissions) tell() {
	for _, a := range as {
		a.w.Admitted(a.n)
	}
}

// admitLocked takes room for the waiting requests that now fit.
func (b *Budget) admitLocked() admissions {
	var admitted admissions
	keep := b.waiting[:0]
	blocked := false
	for _, x := range b.waiting {
		// First come, first served for the budget: once one waits for
		// room, those behind it do too; a request held back by its own
		// connection's share holds back no one else.
		if !blocked && b.fitsLocked(x.share, x.want) {
			b.takeLocked(x.share, x.want)
			admitted = append(admitted, admission{x.w, x.want})
			x.reserved, x.want = x.want, 0
			x.stopTimer()
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

// TryTake takes n bytes for a window that widens, if they are free and
// nobody waits for them; it never waits. A request waiting only for its
// own connection's share waits for no free bytes: it holds back no
// window, as it holds back no other request (a connection's third big
// upload kept every response from widening while it waited).
func (b *Budget) TryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.limit || len(b.claims.waiting) > 0 || b.queueBlockedLocked() {
		return false
	}
	b.held += n
	b.heldNow.Store(b.held)
	return true
}

// GiveBack returns n bytes TryTake took. Its callers hold connection
// locks, so the requests it makes room for are told on a goroutine of
// their own (admitting takes connection locks).
func (b *Budget) GiveBack(n int64) {
	b.mu.Lock()
	b.held -= n
	b.heldNow.Store(b.held)
	var admitted admissions
	if len(b.waiting) > 0 {
		admitted = b.admitLocked()
	}
	b.wakeClaimsLocked()
	b.mu.Unlock()
	if len(admitted) > 0 {
		go admitted.tell()
	}
}

func (b *Budget) dropLocked(r *Reservation) {
	for i, x := range b.waiting {
		if x == r {
			b.waiting = append(b.waiting[:i], b.waiting[i+1:]...)
			break
		}
	}
	r.want = 0
	r.stopTimer()
}

func (r *Reservation) stopTimer() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// expire refuses r, waiting for n bytes, if it is still waiting.
func (b *Budget) expire(r *Reservation, n int64) {
	b.mu.Lock()
	waiting := r.want > 0
	if waiting {
		b.dropLocked(r)
	}
	w := r.w
	b.mu.Unlock()
	if !waiting {
		return
	}
	b.refusals.Add(1)
	w.Refused(&Error{Limit: b.limit, Size: n})
}
