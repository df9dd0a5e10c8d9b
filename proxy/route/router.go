package route

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infergate/infergate/monitor"
)

// FallbackTarget is where a model's calls go when its primary is in
// trouble: another upstream and/or another model name.
type FallbackTarget struct {
	// Upstream serves the fallback model; nil means the primary's.
	Upstream Upstream
	// Model is the fallback model's name; empty means the same name.
	Model string
	// Version is the fallback model's version; empty means none (the
	// server's default), whatever version the client asked of the primary.
	Version string
}

// CascadeConfig turns on edge-first serving: the fallback (edge) model
// answers every call, and a call whose answer is not confident enough is
// sent to the primary, whose answer is returned.
type CascadeConfig struct {
	// Output is the name of the edge model's output tensor holding class
	// probabilities (or scores); its maximum per row is the confidence, and
	// a batched answer is as confident as its least confident row.
	Output string
	// Threshold: a confidence below it escalates to the primary.
	Threshold float64
}

// RouteConfig is the routing of one model, named as clients name it.
type RouteConfig struct {
	// Model is the model name clients send.
	Model string
	// Upstream is the primary; nil means the Director's choice.
	Upstream Upstream
	// Fallback is the lighter model that serves the model's calls while
	// the primary is in trouble; nil means none (an open breaker then
	// fails calls at once with UNAVAILABLE).
	Fallback *FallbackTarget
	// Cascade, with a Fallback, serves edge first (see CascadeConfig).
	Cascade *CascadeConfig
	// HedgeAfter sends a call still unanswered by the primary after this
	// long to the fallback too, and answers with whichever answers first.
	// Zero means automatic: 3 times the primary's recent p99.9 (its
	// successful calls of the last 10s, the calls hedges took from it
	// counted as its slowest), at least 10ms; until that is known, half
	// of what a call's deadline leaves (a guessed delay would hedge every
	// call of a model slower than the guess, and the hedges that won
	// would hide the primary's latency, so the guess would stay).
	// Negative turns hedging off.
	// Needs a Fallback and an idempotent model.
	HedgeAfter time.Duration
	// NonIdempotent marks a model whose calls must never be sent twice: no
	// hedges and no retries; it goes to the fallback only when the proxy
	// did not send it to the primary (breaker open, shed). Inference is a
	// pure function of its inputs, so models are idempotent by default.
	NonIdempotent bool
	// MaxInFlight caps the model's calls in progress; beyond it a call goes
	// to the fallback or is rejected at once with RESOURCE_EXHAUSTED.
	// Zero means no cap.
	MaxInFlight int
	// ShedOnDeadline rejects (or sends to the fallback) at once a call
	// whose remaining deadline is shorter than the primary's recent median
	// latency: it would most likely time out after using a GPU slot.
	ShedOnDeadline bool
}

// RouterOptions configures a Router.
type RouterOptions struct {
	// Upstreams are every upstream the proxy sends to, for their
	// endpoints' state (Endpoints) and metrics.
	Upstreams []Upstream
	// Routes are the per-model routes; models without one go to the
	// Director's upstream (through its breaker, if it has one).
	Routes []RouteConfig
	// Breakers are the upstreams with a circuit breaker and its settings.
	// A route's primary with a fallback gets a breaker with the defaults
	// when it has none here.
	Breakers map[Upstream]BreakerConfig
	// Budget bounds retries and hedges.
	Budget BudgetConfig
	// ProbeEvery sends one call in this many to the primary while an alert
	// holds the model on its fallback, so the alert sees the primary
	// recover. Default 20; negative: none (the alert then resolves only
	// when its rule has had no data for its no-verdict time).
	ProbeEvery int
	// Latency returns the statistics of a model's successful calls on its
	// primary route over the last LatencyWindow, for automatic hedging and
	// deadline shedding; nil means unknown (automatic hedging then
	// hedges only at half a call's deadline and ShedOnDeadline does
	// nothing).
	Latency func(model string) (st monitor.Stats, ok bool)
	// Logger gets route changes; nil discards them.
	Logger *slog.Logger
	// Now is the clock of the route decisions: breakers' windows and open
	// times, the slow start, the retry budget, hedge delays and deadline
	// shedding. Nil means time.Now. (Timers are the time package's, so
	// tests that need them run under testing/synctest.)
	Now func() time.Time
}

// Route modes an operator can force through SetForced.
const (
	ForceAuto     = "auto"     // breakers and alerts decide
	ForcePrimary  = "primary"  // always the primary, breaker and alerts ignored
	ForceFallback = "fallback" // always the fallback
)

// Router is the proxy's routing step for calls that name a model: after
// the model is read from the first frame it picks upstream, model name and
// route. The decision reads an immutable table (swapped whole when an alert
// or the operator changes a model's mode) and the breakers' atomic state:
// a request never waits on a lock to be routed. A Router implements the
// alert package's Actuator (action "fallback").
type Router struct {
	opts  RouterOptions
	log   *slog.Logger
	table atomic.Pointer[routeTable]

	mu      sync.Mutex // writers of table
	changed chan struct{}
	// transitions carries breaker changes from gobreaker's callback to
	// the loop, which logs them: the callback runs under gobreaker's
	// mutex, and a log write can block (a full stderr pipe).
	transitions chan transition
	dropped     atomic.Uint64 // transitions not logged: the queue was full
	stop        chan struct{}
	done        chan struct{}
	closed      sync.Once
}

// routeTable is the immutable snapshot the hot path reads: the routes,
// the breakers and the retry budget, replaced together (Apply) so that a
// call never sees a route whose breaker is from another configuration.
type routeTable struct {
	models map[string]*ModelRoute
	// breakers are the upstreams' transport breakers; modelBreakers the
	// routed models' breakers on an upstream (their primary's, their
	// fallback's), each watching its upstream's transport breaker too.
	breakers      map[Upstream]*Breaker
	modelBreakers map[modelKey]*Breaker
	// directed holds the model breakers of routes whose primary is the
	// Director's choice, made at a model's first call on an upstream
	// with a breaker (modelKey → *Breaker).
	directed  *sync.Map
	ndirected *atomic.Int64 // entries in directed
	budget    *RetryBudget
	// upstreams are every upstream the proxy sends to.
	upstreams []Upstream
}

// modelKey names a model's breaker: the model on one upstream.
type modelKey struct {
	up    Upstream
	model string
}

// ModelRoute is one model's route: its configuration, its mode as alerts
// and the operator set it, and its live counters (shared between table
// versions).
type ModelRoute struct {
	cfg      *RouteConfig
	primary  *Breaker // the model's breaker on its primary, nil if none (and no Upstream)
	fallback *Breaker // the fallback model's breaker on its upstream, if any
	forced   string   // ForceAuto, ForcePrimary, ForceFallback
	alert    string   // the alert holding the model on its fallback, "" if none
	live     *Live
}

// Live holds what changes per call or per second, by atomics.
type Live struct {
	inFlight atomic.Int64
	calls    atomic.Uint64 // for ProbeEvery
	ramp     atomic.Uint64 // for the slow start
	p50, p99 atomic.Int64  // nanoseconds, 0 unknown
	// tail is the primary's p999 as censoredTail estimates it, the base of
	// the automatic hedge delay (nanoseconds, 0 unknown). tailCalls
	// counts the primary's calls the estimate was learnt from, and
	// tailSeen the primary's calls at the last refresh.
	tail      atomic.Int64
	tailCalls atomic.Uint64
	tailSeen  uint64 // the router's loop only
	// waiting is when the first call sent to the primary since its last
	// answer was sent (unix nanoseconds of the router's clock; 0: the
	// primary answered after the last call was sent). How long it has
	// been silent is a hang's own evidence (hedge_delay.go: silentFor).
	waiting atomic.Int64
	// won holds hedgesWon at each of the last LatencyWindow refreshes
	// (a ring, written by the router's loop only).
	won    [LatencyWindow/time.Second + 1]uint64
	wonPos int
	// lastMode is the mode the model was last seen in, for flip counting.
	lastMode atomic.Value // string
	since    atomic.Int64 // unix nanos of the last mode change
	changes  atomic.Uint64
	why      atomic.Value // string: why the mode is what it is

	Counters Counters
}

// Config is the model's route as configured.
func (mr *ModelRoute) Config() *RouteConfig { return mr.cfg }

// Live is the model's live state: its counters, the primary's latency
// and silence.
func (mr *ModelRoute) Live() *Live { return mr.live }

// FallbackBreaker is the fallback model's breaker on its upstream; nil
// if none.
func (mr *ModelRoute) FallbackBreaker() *Breaker { return mr.fallback }

// NewRouter returns a Router and starts its loop (latency refresh, route
// change accounting); Close stops it. It fails on routes that cannot work
// and on bad breaker settings, with the checks RoutingConfig.Plan makes
// of a file's routes (routeProblems, BreakerConfig.Validate).
func NewRouter(opts RouterOptions) (*Router, error) {
	if errs := routeProblems(opts.Routes); len(errs) > 0 {
		return nil, fmt.Errorf("proxy: %w", errors.Join(errs...))
	}
	if opts.ProbeEvery == 0 {
		opts.ProbeEvery = 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Router{
		opts:        opts,
		log:         opts.Logger,
		changed:     make(chan struct{}, 1),
		transitions: make(chan transition, 64),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	t, err := r.buildTable(opts, nil)
	if err != nil {
		return nil, err
	}
	r.table.Store(t)
	go r.loop()
	return r, nil
}

// link points each route at its breakers; run on every new table.
func (r *Router) link(t *routeTable) {
	for name, mr := range t.models {
		mr.primary, mr.fallback = nil, nil
		pk := modelKey{mr.cfg.Upstream, name}
		if pk.up != nil {
			mr.primary = t.modelBreakers[pk]
		}
		// The fallback model's own breaker on its upstream: another
		// model's trouble there (the primary's, on the same server)
		// does not refuse it; a dead server does.
		if fk, ok := fallbackKey(name, mr.cfg); ok && fk != pk {
			mr.fallback = t.modelBreakers[fk]
		}
	}
}

// fallbackKey names the breaker of a route's fallback model; false when
// its upstream is the Director's choice.
func fallbackKey(model string, rc *RouteConfig) (modelKey, bool) {
	fb := rc.Fallback
	if fb == nil {
		return modelKey{}, false
	}
	k := modelKey{fb.Upstream, fb.Model}
	if k.up == nil {
		k.up = rc.Upstream
	}
	if k.model == "" {
		k.model = model
	}
	return k, k.up != nil
}

// Now is the time on the router's clock (RouterOptions.Now).
func (r *Router) Now() time.Time { return r.opts.Now() }

// Budget is the retry budget of the table in force.
func (r *Router) Budget() *RetryBudget { return r.table.Load().budget }

// Upstreams are every upstream the proxy sends to (RouterOptions.Upstreams
// of the table in force).
func (r *Router) Upstreams() []Upstream { return r.table.Load().upstreams }

// Close stops the router's loop. Call it after the server stopped.
func (r *Router) Close() error {
	r.closed.Do(func() { close(r.stop); <-r.done })
	return nil
}

// transition is a breaker's state change, as the log shows it.
type transition struct {
	b                            *Breaker
	from, to                     BreakerState
	calls, failures, consecutive int64
}

// breakerChanged runs under gobreaker's mutex: it only queues the change
// (never blocking) and wakes the loop, which logs it and accounts route
// changes.
func (r *Router) breakerChanged(b *Breaker, from, to BreakerState) {
	calls, failures := b.Counts()
	select {
	case r.transitions <- transition{b, from, to, calls, failures, b.Consecutive()}:
	default:
		r.dropped.Add(1)
	}
	r.poke()
}

// logTransitions logs the queued breaker changes.
func (r *Router) logTransitions() {
	for {
		select {
		case t := <-r.transitions:
			r.log.Warn("circuit breaker", "upstream", t.b.Name(), "model", t.b.Model(), "from", t.from.String(), "to", t.to.String(),
				"window_calls", t.calls, "window_failures", t.failures, "consecutive_failures", t.consecutive)
		default:
			if n := r.dropped.Swap(0); n > 0 {
				r.log.Warn("circuit breaker changes not logged: too many at once", "count", n)
			}
			return
		}
	}
}

func (r *Router) poke() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// loop refreshes latency estimates every second and accounts route
// changes when a breaker or a mode changes.
func (r *Router) loop() {
	defer close(r.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	r.refresh()
	for {
		select {
		case <-r.stop:
			r.logTransitions()
			return
		case <-r.changed:
			r.logTransitions()
			r.account()
		case <-tick.C:
			r.refresh()
			r.account()
		}
	}
}

// LatencyWindow is the span of recent calls RouterOptions.Latency is
// expected to read; the router refreshes its estimates once a second.
const LatencyWindow = 10 * time.Second

// refresh reads each routed model's recent latency.
func (r *Router) refresh() {
	if r.opts.Latency == nil {
		return
	}
	for name, mr := range r.table.Load().models {
		live := mr.live
		won := live.Counters.HedgesWon.Load()
		live.wonPos = (live.wonPos + 1) % len(live.won)
		live.won[live.wonPos] = won
		// The oldest entry is LatencyWindow old (or 0 at start).
		won -= live.won[(live.wonPos+1)%len(live.won)]
		if st, ok := r.opts.Latency(name); ok {
			live.p50.Store(int64(st.P50))
			live.p99.Store(int64(st.P99))
			// While the primary's breaker is open, probing or ramping
			// calls back, the primary is in trouble: the answers it gives
			// then (a slowdown's) are not its healthy tail. Learnt, they
			// would raise the hedge delay until slow calls no longer
			// counted as slow and its breaker closed on a sick upstream.
			if mr.primary.Settled() {
				live.tail.Store(int64(censoredTail(st, won, time.Duration(live.tail.Load()))))
				// The calls the primary answered since the last
				// refresh are behind the estimate now.
				live.tailCalls.Add(live.Counters.Primary.Load() - live.tailSeen)
			}
			live.tailSeen = live.Counters.Primary.Load()
		}
	}
}

// tailKnown says whether the primary's tail estimate has enough calls
// behind it to be evidence: as many as the alerts need to bound a p99.9
// with confidence (monitor.LowerBoundRank).
func (l *Live) tailKnown() bool {
	return l.tail.Load() > 0 && l.tailCalls.Load() >= MinTailCalls
}

// MinTailCalls is the least number of calls for which a lower confidence
// bound on hedgeQuantile exists, the rule the alerts judge quantiles by.
var MinTailCalls = func() uint64 {
	n := uint64(1)
	for {
		if _, ok := monitor.LowerBoundRank(n, hedgeQuantile); ok {
			return n
		}
		n++
	}
}()

// hedgeQuantile is the quantile of the primary's latency that the
// automatic hedge delay is a multiple of: a hedge goes to the lighter
// model, so only calls slower than nearly all of a healthy primary's are
// hedged (a p99 would sit inside a long tail of about 1% of calls and
// hedge all of it).
const hedgeQuantile = 0.999

// censoredTail estimates the primary's hedgeQuantile for the automatic
// hedge delay from the statistics of the calls it answered, the number of
// calls a hedge took from it in the same window, and the previous
// estimate.
//
// A hedge that won leaves no latency on the primary although its call was
// slower than the hedge delay. Taken from the top of the distribution,
// such calls would pull the answered calls' quantile down, the hedge delay
// with it, and so hedge ever more calls of a healthy primary to the
// lighter model. So the won hedges count as the slowest calls: the
// estimate is the answered calls' quantile that leaves 0.1% of all calls
// above it, hedged ones included. When the hedges alone are 0.1% of the
// calls or more, the quantile lies beyond the hedge delay, where the
// answered calls cannot see: the estimate holds. (Raising it would let a
// hung primary's first hedges push the delay towards the callers'
// deadlines, where a hedge comes too late to help.)
//
// A tail quantile also jumps from one window to the next when few calls
// make it; the estimate moves by at most a tenth per refresh either way,
// so one window without slow calls does not drag the delay into the
// body, and the first slow answers of a slowdown (before its breaker
// opens) do not lift it out of reach: a real, lasting change is followed
// within seconds (twice as slow in about 7).
func censoredTail(st monitor.Stats, won uint64, prev time.Duration) time.Duration {
	est := st.Quantile(hedgeQuantile)
	if won > 0 && st.Count > 0 {
		n := float64(st.Count)
		above := (1-hedgeQuantile)*(n+float64(won)) - float64(won) // answered calls above the true quantile
		if above <= 0 {
			est = max(prev, est)
		} else {
			est = st.Quantile(1 - above/n)
		}
	}
	if prev == 0 {
		return est
	}
	return min(max(est, prev*9/10), prev*11/10)
}

// Route modes as /api/v1/routes and the route-change log report them.
const (
	RoutePrimaryMode  = "primary"
	RouteFallbackMode = "fallback"
	RouteCascadeMode  = "cascade"
)

// mode returns where a model's calls go now and why: decide's answer
// (pick.go), the one the calls themselves follow. It reads the breaker
// of the route's own primary upstream; a route without one (its primary
// is whatever the director picks) shows no breaker here, though its calls
// use the director's upstream's.
func (r *Router) mode(mr *ModelRoute) decision {
	return mr.decide(mr.primary)
}

// account counts and logs changes of each model's mode.
func (r *Router) account() {
	now := r.opts.Now()
	for name, mr := range r.table.Load().models {
		d := r.mode(mr)
		mode, why := d.route, d.why
		mr.live.why.Store(why)
		if old := mr.live.lastMode.Load().(string); old != mode {
			mr.live.lastMode.Store(mode)
			mr.live.since.Store(now.UnixNano())
			mr.live.changes.Add(1)
			r.log.Warn("route changed", "model", name, "from", old, "to", mode, "why", why)
		}
	}
}

// update replaces the table with one where f changed the model's route.
func (r *Router) update(model string, f func(mr *ModelRoute) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.table.Load()
	cur := old.models[model]
	if cur == nil {
		return fmt.Errorf("model %q has no route", model)
	}
	next := *cur
	if err := f(&next); err != nil {
		return err
	}
	t := &routeTable{models: maps.Clone(old.models), breakers: old.breakers, modelBreakers: old.modelBreakers,
		directed: old.directed, ndirected: old.ndirected, budget: old.budget}
	t.models[model] = &next
	r.table.Store(t)
	r.poke()
	return nil
}

// SetForced forces a model's route (ForcePrimary, ForceFallback) or
// gives it back to breakers and alerts (ForceAuto).
func (r *Router) SetForced(model, mode string) error {
	switch mode {
	case ForceAuto, ForcePrimary, ForceFallback:
	default:
		return fmt.Errorf("route: must be %s, %s or %s, got %q", ForceAuto, ForcePrimary, ForceFallback, mode)
	}
	return r.update(model, func(mr *ModelRoute) error {
		if mode == ForceFallback && mr.cfg.Fallback == nil {
			return fmt.Errorf("model %q has no fallback", model)
		}
		mr.forced = mode
		return nil
	})
}

// Start carries out an alert's action: "fallback" sends the alert's model
// to its fallback until Stop. It implements alert.Actuator.
func (r *Router) Start(action string, labels map[string]string) (string, error) {
	model, err := actionModel(action, labels)
	if err != nil {
		return "", err
	}
	name := labels["alertname"]
	if !r.hasFallback(model) {
		// A rule for every model acts where a fallback is configured.
		return fmt.Sprintf("model %s has no fallback: nothing to do", model), nil
	}
	if err := r.update(model, func(mr *ModelRoute) error { mr.alert = name; return nil }); err != nil {
		return "", err
	}
	return fmt.Sprintf("model %s routed to its fallback %s", model, r.fallbackName(model)), nil
}

// Stop ends an alert's action: the model returns to its primary (unless a
// breaker or the operator still holds it on the fallback).
func (r *Router) Stop(action string, labels map[string]string) (string, error) {
	model, err := actionModel(action, labels)
	if err != nil {
		return "", err
	}
	if !r.hasFallback(model) {
		return fmt.Sprintf("model %s has no fallback: nothing to do", model), nil
	}
	if err := r.update(model, func(mr *ModelRoute) error { mr.alert = ""; return nil }); err != nil {
		return "", err
	}
	d := r.mode(r.table.Load().models[model])
	if mode, why := d.route, d.why; mode == RouteFallbackMode {
		return fmt.Sprintf("model %s: alert released the fallback; stays on it (%s)", model, why), nil
	}
	return fmt.Sprintf("model %s back on its primary", model), nil
}

func actionModel(action string, labels map[string]string) (string, error) {
	if action != "fallback" {
		return "", fmt.Errorf("unknown action %q (the proxy knows fallback)", action)
	}
	model := labels["model"]
	if model == "" {
		return "", errors.New("the alert has no model label")
	}
	return model, nil
}

func (r *Router) fallbackName(model string) string {
	mr := r.table.Load().models[model]
	if mr == nil || mr.cfg.Fallback == nil {
		return ""
	}
	t := mr.fallbackTarget(model, nil)
	if t.Up != nil {
		return t.Model + " on " + t.Up.Name()
	}
	return t.Model
}

func (r *Router) hasFallback(model string) bool {
	mr := r.table.Load().models[model]
	return mr != nil && mr.cfg.Fallback != nil
}
