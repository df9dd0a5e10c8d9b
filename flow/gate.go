package flow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Band is a call's criticality: strict order between bands, a minimum
// share for the lower ones.
type Band uint8

const (
	Critical Band = iota
	Standard
	Sheddable
	NumBands
)

// BandNames name the bands as headers and metrics spell them.
var BandNames = [NumBands]string{"critical", "standard", "sheddable"}

func (b Band) String() string { return BandNames[b] }

// ParseBand reads a band by name, in any case.
func ParseBand(s string) (Band, bool) {
	for i, n := range BandNames {
		if strings.EqualFold(s, n) {
			return Band(i), true
		}
	}
	return 0, false
}

// Call is one call asking to be sent.
type Call struct {
	Tenant string
	Band   Band
	// Weight is the tenant's share within its band against the others'
	// (deficit round robin); 0 means 1.
	Weight float64
	// Deadline is the call's; zero for none.
	Deadline time.Time
}

// Why a call is refused, each with its reason in the message.
var (
	// ErrDeadline: the call would wait past what its deadline leaves for
	// the model's latency.
	ErrDeadline = errors.New("flow: the call cannot be answered before its deadline")
	// ErrFull: the gate holds its most waiting calls.
	ErrFull = errors.New("flow: too many calls waiting")
	// ErrShed: a more critical call took its place.
	ErrShed = errors.New("flow: shed for a more critical call")
)

// GateOptions configure a Gate; zero values mean the defaults.
type GateOptions struct {
	// Capacity is how many calls may be in flight now (the sum of the
	// replicas' limits); read under the gate's lock. Required.
	Capacity func() int
	// MaxWaiting bounds the calls waiting; 0 means DefaultMaxWaiting.
	MaxWaiting int
	// MinShare is the least share of the calls sent that a band gets
	// while it has calls waiting, whatever the bands before it want;
	// Critical's is unused. Zero values mean DefaultMinShare's.
	MinShare [NumBands]float64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Defaults of GateOptions.
const DefaultMaxWaiting = 1024

// DefaultMinShare: a standard call gets 5% of the calls sent while it
// waits, a sheddable one 1%: never starved.
var DefaultMinShare = [NumBands]float64{0, 0.05, 0.01}

// Gate lets the calls of one model of one upstream go while its replicas
// have room (Capacity), and when they are full decides who goes next:
// the bands in order, each lower band at least its minimum share; within
// a band the tenants in deficit round robin by weight; a call whose
// deadline cannot be met refused at once, never after waiting it out;
// when too many wait, the least critical first.
type Gate struct {
	opts GateOptions

	mu       sync.Mutex
	inFlight int
	waiting  int
	bands    [NumBands]band
	// served counts the calls sent from each band, decayed by shareDecay
	// at each: about the last hundred.
	served [NumBands]float64
	// interval is the mean time between calls sent while calls waited
	// (EWMA), latency that of the answers: the wait and the service a
	// deadline must leave room for.
	interval, latency time.Duration
	lastSent          time.Time
	stats             Stats
}

// Stats are a gate's counters.
type Stats struct {
	InFlight, Waiting int
	Capacity          int
	// Waited counts the calls that waited, Refused those refused, by
	// band.
	Waited  [NumBands]uint64
	Refused [NumBands]uint64
	Sent    [NumBands]uint64
}

const shareDecay = 0.99

// band is one band's waiting calls: a FIFO per tenant, the tenants in a
// ring served by deficit round robin.
type band struct {
	tenants map[string]*tenantQueue
	ring    []*tenantQueue
	next    int
	n       int
}

type tenantQueue struct {
	name    string
	weight  float64
	deficit float64
	visited bool // its quantum added for the current visit
	q       []*waiter
}

type waiter struct {
	c     Call
	ready chan error // buffered: nil to go, or the refusal
	done  bool       // answered (ready written), under the gate's lock
	timer *time.Timer
}

// NewGate returns a gate.
func NewGate(o GateOptions) *Gate {
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = DefaultMaxWaiting
	}
	for b := range o.MinShare {
		if o.MinShare[b] == 0 {
			o.MinShare[b] = DefaultMinShare[b]
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Gate{opts: o}
}

// Acquire returns nil when c may be sent, at once while the replicas have
// room and nobody waits; else it waits its turn. It returns an error
// wrapping ErrDeadline, ErrFull or ErrShed when refused, or ctx's error
// when the caller left. Done must follow a nil return.
func (g *Gate) Acquire(ctx context.Context, c Call) error {
	_, err := g.Wait(ctx, c)
	return err
}

// Wait is Acquire that also says whether the call waited.
func (g *Gate) Wait(ctx context.Context, c Call) (waited bool, err error) {
	g.mu.Lock()
	if g.goesAtOnce(c) {
		g.mu.Unlock()
		return false, nil
	}
	now := g.opts.Now()
	if err := g.admit(c, now); err != nil {
		g.stats.Refused[c.Band]++
		g.mu.Unlock()
		return false, err
	}
	w := &waiter{c: c, ready: make(chan error, 1)}
	g.enqueue(w)
	g.stats.Waited[c.Band]++
	if !c.Deadline.IsZero() {
		// Refused once what its deadline leaves is the model's latency
		// (sent later, it could only time out), with refusalMargin for
		// the refusal to reach the caller before its deadline does.
		at := c.Deadline.Sub(now) - g.latency - refusalMargin
		w.timer = time.AfterFunc(at, func() { g.expire(w) })
	}
	g.dispatch(now) // room may have come between the check and now
	g.mu.Unlock()
	select {
	case err := <-w.ready:
		return true, err
	case <-ctx.Done():
		g.mu.Lock()
		if w.done {
			g.mu.Unlock()
			if err := <-w.ready; err == nil {
				g.Done(0) // let go as it left: the room goes to the next
			}
			return true, ctx.Err()
		}
		g.remove(w)
		w.done = true // its deadline timer must not remove it again
		if w.timer != nil {
			w.timer.Stop()
		}
		g.mu.Unlock()
		return true, ctx.Err()
	}
}

// TryAcquire is Acquire for a caller that cannot wait: true when c may be
// sent now (room, and nobody waiting before it); Done must follow.
func (g *Gate) TryAcquire(c Call) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.goesAtOnce(c)
}

// goesAtOnce sends c when nobody waits and its band has room; the lock
// is held.
func (g *Gate) goesAtOnce(c Call) bool {
	if g.waiting > 0 || g.inFlight >= g.room(c.Band) {
		return false
	}
	g.inFlight++
	g.sent(c.Band)
	return true
}

// admit decides, under the lock, whether c may wait: its deadline leaves
// room for the wait and the model's latency, and there is room to wait
// (made by shedding a less critical call if need be).
func (g *Gate) admit(c Call, now time.Time) error {
	if !c.Deadline.IsZero() && g.interval > 0 {
		ahead := g.ahead(c)
		wait := time.Duration(float64(ahead+1) * float64(g.interval) / g.shareLeft(c.Band))
		if left := c.Deadline.Sub(now); wait+g.latency > left {
			return g.refusal(fmt.Errorf("%w: it would wait about %s behind %d calls and take about %s; its deadline leaves %s",
				ErrDeadline, wait.Round(time.Millisecond), ahead, g.latency.Round(time.Millisecond), left.Round(time.Millisecond)))
		}
	}
	if g.waiting < g.opts.MaxWaiting {
		return nil
	}
	for b := NumBands - 1; b > c.Band; b-- {
		if w := g.bands[b].heaviest(); w != nil {
			g.remove(w)
			g.answer(w, g.refusal(fmt.Errorf("%w: %d calls were waiting, the most allowed, and a %s call came", ErrShed, g.waiting+1, c.Band)))
			g.stats.Refused[b]++
			return nil
		}
	}
	return g.refusal(fmt.Errorf("%w: %d calls are waiting, the most allowed", ErrFull, g.waiting))
}

// Refusal is a refused call's error: why (wrapping ErrDeadline, ErrFull
// or ErrShed), and when trying again makes sense.
type Refusal struct {
	err error
	// RetryAfter is about when the calls waiting now have gone: a
	// client told to come back then (gRPC's retry pushback) does not
	// come back into the same queue at once.
	RetryAfter time.Duration
}

func (r *Refusal) Error() string { return r.err.Error() }
func (r *Refusal) Unwrap() error { return r.err }

// refusal is err with the time the calls waiting take to go: at the
// pace calls are sent, else one latency each slot frees. Lock held.
func (g *Gate) refusal(err error) *Refusal {
	pace := g.interval
	if pace == 0 {
		pace = g.latency / time.Duration(max(g.inFlight, 1))
	}
	return &Refusal{err: err, RetryAfter: time.Duration(g.waiting+1) * pace}
}

// refusalMargin is how long before its deadline a waiting call's
// refusal is sent, besides the model's latency: on a loaded machine the
// refusal must still reach the caller first, or the caller sees its
// deadline pass, not why.
const refusalMargin = 5 * time.Millisecond

// shareLeft is the share of the calls sent that stricter bands than b
// leave to b and the bands under it (of about the last hundred sent, at
// least a tenth): calls of stricter bands that come while a call of b
// waits go first too, so its wait runs slower than the gate's pace by
// that much. Lock held.
func (g *Gate) shareLeft(b Band) float64 {
	var total, stricter float64
	for i, n := range g.served {
		total += n
		if Band(i) < b {
			stricter += n
		}
	}
	if total == 0 {
		return 1
	}
	return max(1-stricter/total, 0.1)
}

// ahead is how many waiting calls go before c would: every call of a
// stricter band, and those of its band that deficit round robin sends
// before c's turn comes: its tenant's calls already waiting, and from
// each other tenant as many as it gets in the rounds c waits (by their
// weights). A heavy tenant's new call waits behind its own queue, not a
// round of the band: estimating it by the band's average let a flood's
// calls wait out their deadlines instead of being refused at once. Lock
// held.
func (g *Gate) ahead(c Call) int {
	n := 0
	for b := Band(0); b < c.Band; b++ {
		n += g.bands[b].n
	}
	bd := &g.bands[c.Band]
	mine, w := 0, c.Weight
	if t := bd.tenants[c.Tenant]; t != nil {
		mine, w = len(t.q), t.weight
	}
	if w <= 0 {
		w = 1
	}
	rounds := float64(mine+1) / w
	for _, t := range bd.ring {
		if t.name != c.Tenant {
			n += min(len(t.q), int(rounds*t.weight))
		}
	}
	return n + mine
}

// Done ends a call Acquire let go (took is its latency; 0 unknown), and
// sends the next waiting ones that now have room.
func (g *Gate) Done(took time.Duration) {
	g.mu.Lock()
	g.inFlight--
	if took > 0 {
		g.latency = ewma(g.latency, took)
	}
	g.dispatch(g.opts.Now())
	g.mu.Unlock()
}

// Stats returns the gate's counters.
func (g *Gate) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.InFlight, s.Waiting, s.Capacity = g.inFlight, g.waiting, g.opts.Capacity()
	return s
}

func ewma(old, v time.Duration) time.Duration {
	if old == 0 {
		return v
	}
	return old + (v-old)/8
}

// sent counts a call of band b sent: every band's count decays, so each
// is of about the last hundred calls whichever way they went. Lock held.
func (g *Gate) sent(b Band) {
	g.stats.Sent[b]++
	for i := range g.served {
		g.served[i] *= shareDecay
	}
	g.served[b]++
}

// room is how many calls may be in flight when a call of band b would
// go: the capacity, less one slot kept for critical calls while they come
// (a critical call then waits for at most the calls running, not behind
// one queued at the replica too: on a one-slot model that halves its
// wait). Lock held.
func (g *Gate) room(b Band) int {
	c := g.opts.Capacity()
	if b != Critical && c >= 2 && g.served[Critical] >= criticalSeen {
		return c - 1
	}
	return c
}

// criticalSeen is the decayed count of critical calls sent (about the
// last hundred calls) from which a slot is kept for them.
const criticalSeen = 0.5

// dispatch sends waiting calls while there is room; the lock is held.
func (g *Gate) dispatch(now time.Time) {
	for g.waiting > 0 {
		b := g.nextBand()
		if g.inFlight >= g.room(b) {
			if b == Critical || g.bands[Critical].n == 0 || g.inFlight >= g.room(Critical) {
				break
			}
			b = Critical // the kept slot
		}
		w := g.bands[b].pop()
		g.waiting--
		g.inFlight++
		g.sent(w.c.Band)
		if !g.lastSent.IsZero() {
			g.interval = ewma(g.interval, now.Sub(g.lastSent))
		}
		g.lastSent = now
		g.answer(w, nil)
	}
	if g.waiting == 0 {
		g.lastSent = time.Time{} // an idle gap is no interval
	}
}

// nextBand is the band whose call goes next: a lower band below its
// minimum share of the calls sent, the most starved first; else the most
// critical band with calls waiting.
func (g *Gate) nextBand() Band {
	total := 0.0
	for _, s := range g.served {
		total += s
	}
	best, starved := NumBands, 0.0
	for b := Critical + 1; b < NumBands; b++ {
		if g.bands[b].n == 0 {
			continue
		}
		if total*g.opts.MinShare[b] < 1 {
			continue // too few sent for the band to have earned one
		}
		if lack := g.opts.MinShare[b] - g.served[b]/total; lack > starved {
			best, starved = b, lack
		}
	}
	if best < NumBands {
		return best
	}
	for b := range g.bands {
		if g.bands[b].n > 0 {
			return Band(b)
		}
	}
	return Critical
}

func (g *Gate) answer(w *waiter, err error) {
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.ready <- err
}

// expire refuses w when its deadline leaves no time for the model's
// latency.
func (g *Gate) expire(w *waiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.done {
		return
	}
	g.remove(w)
	g.stats.Refused[w.c.Band]++
	g.answer(w, g.refusal(fmt.Errorf("%w: it waited until its deadline left only the model's latency (%s)",
		ErrDeadline, g.latency.Round(time.Millisecond))))
}

func (g *Gate) enqueue(w *waiter) {
	bd := &g.bands[w.c.Band]
	if bd.tenants == nil {
		bd.tenants = map[string]*tenantQueue{}
	}
	t := bd.tenants[w.c.Tenant]
	if t == nil {
		weight := w.c.Weight
		if weight <= 0 {
			weight = 1
		}
		t = &tenantQueue{name: w.c.Tenant, weight: weight}
		bd.tenants[w.c.Tenant] = t
		bd.ring = append(bd.ring, t)
	}
	t.q = append(t.q, w)
	bd.n++
	g.waiting++
}

// remove takes a waiting w out of its queue.
func (g *Gate) remove(w *waiter) {
	bd := &g.bands[w.c.Band]
	t := bd.tenants[w.c.Tenant]
	if t == nil {
		return // not waiting (a caller of this must have checked: kept safe)
	}
	for i, x := range t.q {
		if x == w {
			t.q = append(t.q[:i], t.q[i+1:]...)
			break
		}
	}
	bd.n--
	g.waiting--
	if len(t.q) == 0 {
		bd.drop(t)
	}
}

// pop is the band's next call by deficit round robin: each tenant's turn
// adds its weight to its deficit, and it sends a call per unit of it.
func (bd *band) pop() *waiter {
	for {
		t := bd.ring[bd.next]
		if !t.visited {
			t.deficit += t.weight
			t.visited = true
		}
		if t.deficit >= 1 {
			t.deficit--
			w := t.q[0]
			t.q = t.q[1:]
			bd.n--
			if len(t.q) == 0 {
				bd.drop(t)
			}
			return w
		}
		t.visited = false
		bd.next = (bd.next + 1) % len(bd.ring)
	}
}

// drop takes an empty tenant out of the ring: a tenant that stops
// sending keeps no credit.
func (bd *band) drop(t *tenantQueue) {
	delete(bd.tenants, t.name)
	for i, x := range bd.ring {
		if x == t {
			bd.ring = append(bd.ring[:i], bd.ring[i+1:]...)
			if i < bd.next {
				bd.next--
			}
			break
		}
	}
	if bd.next >= len(bd.ring) {
		bd.next = 0
	}
}

// heaviest is the last call of the band's tenant with the most calls
// waiting: shedding takes from whoever holds the most of the queue; nil
// when none waits.
func (bd *band) heaviest() *waiter {
	var top *tenantQueue
	for _, t := range bd.ring {
		if len(t.q) > 0 && (top == nil || len(t.q) > len(top.q)) {
			top = t
		}
	}
	if top == nil {
		return nil
	}
	return top.q[len(top.q)-1]
}
