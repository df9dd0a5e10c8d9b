package budget

import (
	"context"
	"time"
)

// The gRPC path's part of the Budget. Calls that grpc-go's server reads
// (the fast path off, or calls the relay hands on) cannot be held back by
// window the way the relay's own streams are: grpc-go reads a message
// whole when the proxy asks for it, and its size is known only then. So
// such a call asks first (Admit) and is let in while the budget has room
// for one more message as big as the biggest seen lately (est); then it
// holds what it really read and the answer it is writing, until its end.
// While the budget is spent the call waits before it reads anything:
// grpc-go grants its sender no more than one stream window meanwhile, so
// the sender waits too. Waiting calls are let in one at a time, in order,
// as room comes: waking them all at once would let each read a message
// before any had counted it.

// initialClaimEstimate is est before any message was seen: grpc-go's
// default largest message, so a burst of big uploads at start cannot pass
// the budget by more than one of them each.
const initialClaimEstimate = 4 << 20

// minClaimEstimate keeps est from reaching zero on empty messages.
const minClaimEstimate = 4 << 10

// claimQueue is the Budget's state for Claims, guarded by Budget.mu.
type claimQueue struct {
	est     int64          // expected size of the next message
	unheld  int64          // claims let in that hold nothing yet
	waiting []*claimWaiter // in arrival order
}

type claimWaiter struct {
	ch       chan struct{} // closed when let in
	admitted bool
}

// Claim is one gRPC-path call's hold on the budget: zero until Admit
// fills it; Release gives back everything it holds. Not safe for
// concurrent use by several goroutines.
type Claim struct {
	b       *Budget
	held    int64
	counted bool // in claimQueue.unheld
}

// Admit waits until the budget has room for c's call, the call's context
// ends (its error is returned) or it waited its deadline or MaxWait away
// (*Error). Release c when the call ends, whatever Admit returned.
func (b *Budget) Admit(ctx context.Context, c *Claim) error {
	*c = Claim{b: b}
	b.mu.Lock()
	if len(b.claims.waiting) == 0 && b.claimFitsLocked() {
		b.claims.unheld++
		c.counted = true
		b.mu.Unlock()
		return nil
	}
	w := &claimWaiter{ch: make(chan struct{})}
	b.claims.waiting = append(b.claims.waiting, w)
	b.mu.Unlock()
	b.waits.Add(1)

	wait := MaxWait
	if d, ok := ctx.Deadline(); ok {
		// A little before the deadline, so the client reads why (the
		// budget) rather than its own DEADLINE_EXCEEDED.
		left := time.Until(d)
		wait = min(wait, left-min(left/20, 50*time.Millisecond))
	}
	timer := time.NewTimer(max(wait, 0))
	defer timer.Stop()
	var err error
	select {
	case <-w.ch:
		c.counted = true
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = &Error{Limit: b.limit}
	}
	b.mu.Lock()
	if w.admitted { // let in as the wait ended: take it, Release gives it back
		b.mu.Unlock()
		c.counted = true
		return nil
	}
	for i, x := range b.claims.waiting {
		if x == w {
			b.claims.waiting = append(b.claims.waiting[:i], b.claims.waiting[i+1:]...)
			break
		}
	}
	b.mu.Unlock()
	if _, ok := err.(*Error); ok {
		b.refusals.Add(1)
	}
	return err
}

// claimFitsLocked says whether one more claim fits: the relay's streams
// waiting for the budget come first, and the claims let in but not yet
// holding are counted at est each. With nothing held one claim always
// fits, so a message bigger than est (or the budget) still passes.
func (b *Budget) claimFitsLocked() bool {
	if b.queueBlockedLocked() {
		return false
	}
	if b.held == 0 && b.claims.unheld == 0 {
		return true
	}
	return b.held+(b.claims.unheld+1)*b.claims.est <= b.limit
}

// wakeClaimsLocked lets in the waiting claims that now fit, in order.
func (b *Budget) wakeClaimsLocked() {
	q := &b.claims
	for len(q.waiting) > 0 && b.claimFitsLocked() {
		w := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		q.unheld++
		w.admitted = true
		close(w.ch)
	}
}

// Hold counts n more bytes held by c's call (its request as read, then
// its answer while it is written).
func (c *Claim) Hold(n int64) {
	b := c.b
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	if c.counted {
		c.counted = false
		b.claims.unheld--
		// est follows the sizes seen: up at once, down slowly.
		if n > b.claims.est {
			b.claims.est = n
		} else {
			b.claims.est = max(b.claims.est-(b.claims.est-n)/16, minClaimEstimate)
		}
	}
	c.held += n
	b.held += n
	b.heldNow.Store(b.held)
	b.wakeClaimsLocked() // est or unheld may have made room
	b.mu.Unlock()
}

// Release gives back what c holds; it is a no-op on a zero or released
// Claim.
func (c *Claim) Release() {
	b := c.b
	if b == nil {
		return
	}
	c.b = nil
	b.mu.Lock()
	if c.counted {
		b.claims.unheld--
	}
	b.held -= c.held
	b.heldNow.Store(b.held)
	admitted := b.admitLocked()
	b.wakeClaimsLocked()
	b.mu.Unlock()
	admitted.tell()
}
