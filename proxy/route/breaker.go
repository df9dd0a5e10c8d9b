package route

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"google.golang.org/grpc/codes"
)

// BreakerConfig says when an upstream's circuit breaker opens and how it
// closes again. The zero value of each field means its documented default.
type BreakerConfig struct {
	// ConsecutiveFailures opens the breaker after this many failures in a
	// row. Default 5; negative turns the rule off.
	ConsecutiveFailures int
	// FailureRatio opens the breaker when at least this share of the calls
	// of the last Window failed, once MinCalls calls were made in it.
	// Default 0.5; negative turns the rule off.
	FailureRatio float64
	// MinCalls is the least number of calls in Window for FailureRatio to
	// count. Default 20.
	MinCalls int
	// Window is the span FailureRatio looks at, in whole seconds. Default
	// 10s.
	Window time.Duration
	// SlowCall makes a call that took longer than this a failure, even one
	// that succeeded: for inference, an answer after the caller's budget is
	// as bad as none. Zero means no latency threshold (hedged calls still
	// count as slow; see RouteConfig.HedgeAfter).
	SlowCall time.Duration
	// OpenFor is how long the breaker stays open before half-open probes.
	// Default 5s. It doubles each time the breaker opens again within
	// Window of closing, after the slow start ended (once: at most 2 x
	// OpenFor, so that a healed upstream waits at most that long to be
	// probed); a failed probe keeps it.
	OpenFor time.Duration
	// Probes is the number of half-open calls that must all succeed to
	// close the breaker; one failure opens it again. Default 3.
	Probes int
	// SlowStart is how long a closed breaker takes to give its upstream
	// all of a model's calls again: the share sent to it grows from 10% to
	// 100% over this time, the rest going to the fallback. An upstream
	// that answers a few probes but not the full load (a slowdown, a
	// smaller GPU after a restart) then trips again before most calls are
	// back on it, instead of flapping. Default half of OpenFor (at normal
	// rates a sick upstream trips again within a fraction of a second of
	// 10% of the calls); negative: none.
	// Only models with a fallback are ramped.
	SlowStart time.Duration
	// FailureCodes are the status codes that count as the upstream's
	// failure. Default DefaultFailureCodes. Other codes (INVALID_ARGUMENT,
	// NOT_FOUND: the request's fault) count as successes: the upstream
	// answered.
	FailureCodes []codes.Code
}

// DefaultFailureCodes are the codes that count as an upstream's failure
// when BreakerConfig.FailureCodes is empty: the server or the network
// failed, or answered too late.
var DefaultFailureCodes = []codes.Code{
	codes.Unavailable, codes.Internal, codes.Unknown, codes.DeadlineExceeded,
	codes.ResourceExhausted, codes.DataLoss, codes.Aborted,
}

// withDefaults fills the zero fields of c.
func (c BreakerConfig) WithDefaults() BreakerConfig {
	if c.ConsecutiveFailures == 0 {
		c.ConsecutiveFailures = 5
	}
	if c.FailureRatio == 0 {
		c.FailureRatio = 0.5
	}
	if c.MinCalls <= 0 {
		c.MinCalls = 20
	}
	if c.Window <= 0 {
		c.Window = 10 * time.Second
	}
	if c.OpenFor <= 0 {
		c.OpenFor = 5 * time.Second
	}
	if c.Probes <= 0 {
		c.Probes = 3
	}
	if c.SlowStart == 0 {
		c.SlowStart = c.OpenFor / 2
	}
	if len(c.FailureCodes) == 0 {
		c.FailureCodes = DefaultFailureCodes
	}
	return c
}

// Validate reports the first field of c that cannot work.
func (c BreakerConfig) Validate() error {
	switch {
	case c.FailureRatio > 1:
		return fmt.Errorf("failure_ratio: must be at most 1, got %v", c.FailureRatio)
	case c.MinCalls < 0:
		return fmt.Errorf("min_calls: must be positive, got %d", c.MinCalls)
	case c.Window < 0 || (c.Window > 0 && c.Window < time.Second):
		return fmt.Errorf("window: must be at least 1s, got %s", c.Window)
	case c.Window > 10*time.Minute:
		return fmt.Errorf("window: must be at most 10m, got %s", c.Window)
	case c.SlowCall < 0:
		return fmt.Errorf("slow_call: must be 0 (off) or positive, got %s", c.SlowCall)
	case c.OpenFor < 0:
		return fmt.Errorf("open_for: must be positive, got %s", c.OpenFor)
	case c.Probes < 0 || c.Probes > 1000:
		return fmt.Errorf("probes: must be between 1 and 1000, got %d", c.Probes)
	}
	for _, code := range c.FailureCodes {
		if code == codes.OK {
			return errors.New("failure_codes: OK is not a failure")
		}
	}
	return nil
}

// BreakerState is a breaker's state: closed (calls flow), open (calls go
// to the fallback or fail at once), half-open (a few probe calls decide).
type BreakerState int32

// The breaker states, in the order gobreaker numbers them.
const (
	BreakerClosed   BreakerState = BreakerState(gobreaker.StateClosed)
	BreakerHalfOpen BreakerState = BreakerState(gobreaker.StateHalfOpen)
	BreakerOpen     BreakerState = BreakerState(gobreaker.StateOpen)
)

func (s BreakerState) String() string { return gobreaker.State(s).String() }

// What a call reports to gobreaker: errFailed for a failure, errExcluded
// for a call that says nothing of the upstream (gobreaker then neither
// counts it nor lets it hold a half-open probe's place).
var (
	errFailed   = errors.New("proxy: upstream call failed")
	errExcluded = errors.New("proxy: call cancelled before the upstream answered")
)

// Verdict is what one call says of its upstream and its model there.
type Verdict int8

const (
	VerdictOK     Verdict = iota // answered (an answer with a client-fault code included)
	VerdictFailed                // the model's failure: a failure code the server sent, or slower than SlowCall
	VerdictNone                  // cancelled, or refused by the batcher's full queue
	// VerdictTransport: the call failed on the way to the server, which
	// never answered it: connection refused or reset, GOAWAY, a stream
	// reset before any response header.
	VerdictTransport
)

// A breaker's scope is its evidence. An upstream's transport breaker
// (model "") opens on failures of the way to the server (VerdictTransport)
// and refuses every model there: a dead server. A model's breaker on an
// upstream (model set, conn its upstream's transport breaker) opens on
// that model's failures there (VerdictFailed: statuses the server sent,
// slow calls) and refuses that model only; it also refuses while conn
// does. So one model's trouble never refuses another model, nor a
// fallback that lives on the same server.
//
// Breaker is one circuit breaker. gobreaker's state machine
// (closed, open, half-open with a bounded number of probes, a timeout, a
// generation per state so late results of an old state are ignored) decides;
// but gobreaker takes its mutex on every call it sees, so in the closed
// state, where nearly all calls are, the breaker counts on its own with
// atomics and calls gobreaker only for a failure: a healthy upstream's calls
// share no lock. The state is mirrored in an atomic for the hot path.
type Breaker struct {
	// name is the upstream's; model the model's, "" for a transport
	// breaker. conn is the upstream's transport breaker of a model's
	// breaker, nil for a transport breaker (or an upstream without one).
	name  string
	model string
	conn  *Breaker
	// owner says whose breaker it is (the proxy keeps where its upstream
	// was when it was made); nil in tests that make one alone.
	owner any
	cfg   BreakerConfig
	cb    *gobreaker.TwoStepCircuitBreaker[struct{}]
	now   func() time.Time
	// failure[c] says whether code c counts as the upstream's failure.
	failure [32]bool

	state     atomic.Int32 // BreakerState
	openUntil atomic.Int64 // unix nanoseconds when the open state ends
	// trips counts the openings from closed since the breaker last stayed
	// closed for a whole Window; any after the first doubles the open
	// time.
	trips    atomic.Int64
	closedAt atomic.Int64 // unix nanoseconds of the last closing
	// rampUntil ends the slow start after a closing (unix nanoseconds).
	rampUntil atomic.Int64
	// consecutive counts failures since the last success.
	consecutive atomic.Int64
	// buckets count calls and failures per second of the window.
	buckets []bucket
	// transitions counts state changes by target state.
	transitions [3]atomic.Uint64
	// onChange is told of every state change, after it happened; it must
	// not block (it runs under gobreaker's mutex).
	onChange func(b *Breaker, from, to BreakerState)
}

// bucket holds one second of a breaker's window. A bucket reused for a new
// second is reset by whoever sees it first; a count that races with the
// reset may be lost, which a ratio over many calls tolerates.
type bucket struct {
	sec      atomic.Int64
	calls    atomic.Int64
	failures atomic.Int64
}

func NewBreaker(name, model string, cfg BreakerConfig, now func() time.Time, onChange func(*Breaker, BreakerState, BreakerState)) *Breaker {
	cfg = cfg.WithDefaults()
	b := &Breaker{name: name, model: model, cfg: cfg, now: now, onChange: onChange,
		buckets: make([]bucket, int(cfg.Window/time.Second))}
	for _, c := range cfg.FailureCodes {
		if int(c) < len(b.failure) {
			b.failure[c] = true
		}
	}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name + "/" + model,
		MaxRequests: uint32(cfg.Probes),
		Timeout:     cfg.OpenFor,
		// Counts are ours (see the type's comment); gobreaker's own
		// count only the failures it is shown.
		ReadyToTrip:   func(gobreaker.Counts) bool { return b.shouldTrip() },
		IsExcluded:    func(err error) bool { return errors.Is(err, errExcluded) },
		OnStateChange: func(_ string, from, to gobreaker.State) { b.Changed(BreakerState(from), BreakerState(to)) },
	})
	return b
}

// Changed mirrors a state change; gobreaker calls it under its mutex, so
// it only stores atomics and hands the news on without blocking. Tests
// of what reads breakers drive one through its states with it.
func (b *Breaker) Changed(from, to BreakerState) {
	now := b.now()
	switch to {
	case BreakerOpen:
		// Hysteresis: a breaker that opens again soon after it closed and
		// after its slow start gave the upstream all calls back (it coped
		// with the probes and the ramp but not with the full load) stays
		// open twice as long, so a sick upstream is not flipped to and fro
		// every OpenFor. One that opens again during the slow start was
		// caught with a share of the calls: the ramp already kept the
		// route from flipping, and a healed upstream must not wait longer
		// to be probed. A failed probe keeps the open time: an upstream
		// that is simply still down is probed at the same pace, and found
		// as soon as it is back.
		k := b.trips.Load()
		if from == BreakerClosed {
			switch {
			case now.UnixNano()-b.closedAt.Load() >= int64(b.cfg.Window):
				k = 1
			case now.UnixNano() < b.rampUntil.Load():
				k = max(k, 1)
			default:
				k++
			}
			b.trips.Store(k)
		}
		b.openUntil.Store(now.Add(b.cfg.OpenFor << min(k-1, 1)).UnixNano())
	case BreakerClosed:
		b.closedAt.Store(now.UnixNano())
		if b.cfg.SlowStart > 0 {
			b.rampUntil.Store(now.Add(b.cfg.SlowStart).UnixNano())
		}
		// A fresh start: old failures must not trip it again at once.
		b.consecutive.Store(0)
		for i := range b.buckets {
			b.buckets[i].sec.Store(0)
		}
	}
	b.state.Store(int32(to))
	b.transitions[to].Add(1)
	if b.onChange != nil {
		b.onChange(b, from, to)
	}
}

// State returns the breaker's state as last mirrored.
func (b *Breaker) State() BreakerState { return BreakerState(b.state.Load()) }

// isFailure says whether a call that ended with code after took counts as
// the upstream's failure.
func (b *Breaker) IsFailure(code codes.Code, took time.Duration) bool {
	if int(code) < len(b.failure) && b.failure[code] {
		return true
	}
	return b.cfg.SlowCall > 0 && took > b.cfg.SlowCall
}

// admit says whether a call may go to the upstream now, through b and,
// for a model's breaker, its upstream's transport breaker. It returns a
// non-nil report function when either is half-open (the call is a probe),
// which must be called with the call's verdict (VerdictNone gives its
// place to another probe); nil with ok true when both are closed, where
// the caller reports with record.
func (b *Breaker) Admit() (probe func(Verdict), ok bool) {
	var conn func(Verdict)
	if b.conn != nil {
		if conn, ok = b.conn.admitOwn(); !ok {
			return nil, false
		}
	}
	own, ok := b.admitOwn()
	if !ok {
		if conn != nil {
			conn(VerdictNone)
		}
		return nil, false
	}
	if own == nil && conn == nil {
		return nil, true
	}
	// A probe of one of the two: the other, closed, counts the call as
	// record would.
	return func(v Verdict) {
		if own != nil {
			own(b.judge(v))
		} else {
			b.RecordOwn(b.judge(v))
		}
		if conn != nil {
			conn(b.conn.judge(v))
		} else if b.conn != nil {
			b.conn.RecordOwn(b.conn.judge(v))
		}
	}, true
}

// judge is what a call's verdict says of this breaker's evidence: a
// transport failure says nothing of a model, and is the transport
// breaker's failure; a model's failure shows the transport working.
func (b *Breaker) judge(v Verdict) Verdict {
	switch {
	case v == VerdictTransport && b.model != "":
		return VerdictNone
	case v == VerdictTransport:
		return VerdictFailed
	case v == VerdictFailed && b.model == "":
		return VerdictOK
	}
	return v
}

// admitOwn is admit for b alone.
func (b *Breaker) admitOwn() (probe func(Verdict), ok bool) {
	switch {
	case b.State() == BreakerClosed:
		return nil, true
	case b.Refusing():
		return nil, false
	}
	// Open past its time (gobreaker moves to half-open on this call) or
	// half-open: gobreaker lets Probes calls through.
	done, err := b.cb.Allow()
	if err != nil {
		return nil, false
	}
	if b.State() == BreakerClosed {
		// The probes closed it between our load and Allow: a plain call.
		done(nil)
		return nil, true
	}
	// Reported once: callers defer a VerdictNone so that a panic
	// between admit and the report cannot keep a half-open slot for
	// good (gobreaker frees it only on a report).
	var reported atomic.Bool
	return func(v Verdict) {
		if !reported.CompareAndSwap(false, true) {
			return
		}
		switch v {
		case VerdictFailed:
			done(errFailed)
		case VerdictNone:
			done(errExcluded)
		default:
			done(nil)
		}
	}, true
}

// Refusing says whether the breaker (or its upstream's transport
// breaker) is open and its open time not over: admit refuses every call
// then (past it, the next call is a probe).
func (b *Breaker) Refusing() bool {
	return b.refusingOwn() || b.conn != nil && b.conn.refusingOwn()
}

func (b *Breaker) refusingOwn() bool {
	return b.State() == BreakerOpen && b.now().UnixNano() < b.openUntil.Load()
}

// gate is the state that decides a model's calls: the worse of b's and
// its upstream's transport breaker's (open, then half-open, then closed).
func (b *Breaker) Gate() BreakerState {
	s := b.State()
	if b.conn != nil {
		s = max(s, b.conn.State())
	}
	return s
}

// gateName names the breaker that gate's state is from, for people.
func (b *Breaker) GateName() string {
	if b.conn != nil && b.conn.State() > b.State() {
		return b.conn.name
	}
	if b.model != "" {
		return b.model + " on " + b.name
	}
	return b.name
}

// record counts the verdict of a call admitted with both breakers
// closed, each by what it says of its evidence (judge).
func (b *Breaker) Record(v Verdict) {
	b.RecordOwn(b.judge(v))
	if b.conn != nil {
		b.conn.RecordOwn(b.conn.judge(v))
	}
}

// RecordOwn counts a verdict of b's own evidence, admitted in the closed
// state; VerdictNone counts nothing.
func (b *Breaker) RecordOwn(v Verdict) {
	if v == VerdictNone || b.State() != BreakerClosed {
		return
	}
	failed := v == VerdictFailed
	bk := b.bucketNow()
	bk.calls.Add(1)
	if !failed {
		if b.consecutive.Load() != 0 {
			b.consecutive.Store(0)
		}
		return
	}
	bk.failures.Add(1)
	b.consecutive.Add(1)
	if b.shouldTrip() && b.State() == BreakerClosed {
		// Shown to gobreaker only now: ReadyToTrip reads our counts.
		if done, err := b.cb.Allow(); err == nil {
			done(errFailed)
		}
	}
}

// bucketNow returns the bucket of the current second, reset if it last
// held an older second.
func (b *Breaker) bucketNow() *bucket {
	sec := b.now().Unix()
	bk := &b.buckets[int(sec%int64(len(b.buckets)))]
	if old := bk.sec.Load(); old != sec && bk.sec.CompareAndSwap(old, sec) {
		bk.calls.Store(0)
		bk.failures.Store(0)
	}
	return bk
}

// shouldTrip applies the consecutive-failure and failure-ratio rules.
func (b *Breaker) shouldTrip() bool {
	if n := b.cfg.ConsecutiveFailures; n > 0 && b.consecutive.Load() >= int64(n) {
		return true
	}
	if b.cfg.FailureRatio < 0 {
		return false
	}
	calls, failures := b.Counts()
	return calls >= int64(b.cfg.MinCalls) && float64(failures) >= b.cfg.FailureRatio*float64(calls)
}

// counts sums the window's buckets.
func (b *Breaker) Counts() (calls, failures int64) {
	now := b.now().Unix()
	for i := range b.buckets {
		bk := &b.buckets[i]
		if s := bk.sec.Load(); s > now-int64(len(b.buckets)) && s <= now {
			calls += bk.calls.Load()
			failures += bk.failures.Load()
		}
	}
	return calls, failures
}

// share returns the part of its calls a model with a fallback sends to
// this upstream now: 1, or during the slow start after a closing (of b,
// or of its upstream's transport breaker) a share growing from 0.1 to 1.
func (b *Breaker) Share() float64 {
	s := b.shareOwn()
	if b.conn != nil {
		s = min(s, b.conn.shareOwn())
	}
	return s
}

func (b *Breaker) shareOwn() float64 {
	until := b.rampUntil.Load()
	if until == 0 {
		return 1
	}
	left := until - b.now().UnixNano()
	if left <= 0 {
		return 1
	}
	return 0.1 + 0.9*(1-float64(left)/float64(b.cfg.SlowStart))
}

// settled says whether the upstream is past its trouble: no breaker, or
// one closed with its slow start over. Its latency then is its healthy
// one, the one automatic hedging learns.
func (b *Breaker) Settled() bool {
	return b == nil || (b.Gate() == BreakerClosed && b.Share() >= 1)
}

// Name is the upstream's name; Model the model's, "" for a transport
// breaker.
func (b *Breaker) Name() string  { return b.name }
func (b *Breaker) Model() string { return b.model }

// Config is the breaker's configuration, defaults filled.
func (b *Breaker) Config() BreakerConfig { return b.cfg }

// Conn is the upstream's transport breaker of a model's breaker; nil
// none.
func (b *Breaker) Conn() *Breaker { return b.conn }

// Link makes b's owner owner and its upstream's transport breaker conn
// (nil none), before b is used.
func (b *Breaker) Link(owner any, conn *Breaker) { b.owner, b.conn = owner, conn }

// Owner is what Link said b belongs to.
func (b *Breaker) Owner() any { return b.owner }

// Consecutive counts the failures since the last success.
func (b *Breaker) Consecutive() int64 { return b.consecutive.Load() }

// Transitions counts the changes into state s.
func (b *Breaker) Transitions(s BreakerState) uint64 { return b.transitions[s].Load() }

// OpenUntil is when the open state ends (unix nanoseconds).
func (b *Breaker) OpenUntil() int64 { return b.openUntil.Load() }
