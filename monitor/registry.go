package monitor

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Registry holds the series of one proxy, rotates their windows and exports
// them. Its methods are safe for concurrent use.
type Registry struct {
	cfg config

	// state is the immutable series table; lookups read it without a lock
	// and creation replaces it under mu.
	state    atomic.Pointer[seriesState]
	mu       sync.Mutex
	full     atomic.Bool // the cap is reached: unknown keys go to overflow without mu
	overflow *Series
	// droppedCalls counts the calls of series dropped for idleness.
	droppedCalls atomic.Int64
	// overflowBy counts the calls sent to the overflow series, by reason.
	overflowBy [numOverflowReasons]atomic.Int64
	// streamDrops counts what stream meters left out, by reason.
	streamDrops [numStreamDrops]atomic.Int64

	// winMu guards every Series.win, free and ticks: Rotate writes, Snapshot
	// reads. The hot path never takes it.
	winMu      sync.RWMutex
	free       packedFree
	ticks      int
	tick       atomic.Int64 // ticks, for readers without winMu
	lastRotate time.Time

	subMu sync.Mutex
	subs  []chan time.Time // Rotations

	inflightMu sync.Mutex
	inflight   map[string]*Gauge

	// durs is the request histogram of each label set with a series
	// (guarded by mu); nil when Options.NoRequestHistogram.
	durs map[labelSet]*durHist

	tokens    sync.Pool // *shardToken
	nextToken atomic.Uint32
}

type seriesState struct {
	m    map[SeriesKey]*Series
	list []*Series // sorted by key
	// models and methods count the series of each model and method, so
	// that a NotFound or Unimplemented call can tell whether its model or
	// method is known.
	models, methods map[string]int
	// carried holds the byte totals (in, out) of dropped series whose
	// label set still has a live series (another code class): the byte
	// counters add series by label set, and must not go down when one of
	// them goes. Part of the state, so a scrape reads it with the list.
	carried map[labelSet][2]int64
	// slow holds the slow-call keeper of each (model, version) that has
	// a series; a keeper goes with its group's last series.
	slow map[slowGroup]*slowKeeper
}

// newState builds the state of list (sorted by key).
func newState(list []*Series) *seriesState {
	st := &seriesState{
		m: make(map[SeriesKey]*Series, len(list)), list: list,
		models: map[string]int{}, methods: map[string]int{},
		slow: map[slowGroup]*slowKeeper{},
	}
	for _, s := range list {
		st.m[s.key] = s
		if s.slow != nil {
			st.slow[s.slow.group] = s.slow
		}
		st.models[s.key.Model]++
		st.methods[s.key.Method]++
	}
	return st
}

// Why a call went to the overflow series.
const (
	overflowMaxSeries = iota
	overflowTooLong
	overflowBadUTF8
	numOverflowReasons
)

var overflowReasons = [numOverflowReasons]string{"max_series", "label_too_long", "label_invalid_utf8"}

// UnknownLabel replaces the model (or the method) of a call that the
// upstream answered NotFound or Unimplemented while that model (or method)
// has no series of its own: junk names share one series.
const UnknownLabel = "(unknown)"

// NewRegistry returns an empty registry configured by opts.
func NewRegistry(opts Options) *Registry {
	r := &Registry{cfg: opts.config(), inflight: make(map[string]*Gauge)}
	r.tokens.New = func() any { return &shardToken{i: r.nextToken.Add(1) - 1} }
	if r.cfg.promHistogram {
		r.durs = map[labelSet]*durHist{}
	}
	r.state.Store(newState(nil))
	r.overflow = r.newSeries(OverflowKey)
	r.overflow.overflow = true
	r.lastRotate = r.cfg.now()
	return r
}

// newSeries makes the series of key (called with mu held, or before the
// registry is shared).
func (r *Registry) newSeries(key SeriesKey) *Series {
	var dur *durHist
	if r.durs != nil {
		l := labelsOf(key)
		if dur = r.durs[l]; dur == nil {
			dur = &durHist{created: r.cfg.now()}
			r.durs[l] = dur
		}
	}
	return newSeries(key, r.cfg.shards, r.cfg.slicesPerMinute, &r.tokens, dur, r.cfg.now)
}

// lookup returns the series for key, creating it if needed, and, for the
// overflow series, why (-1 otherwise). Once the registry holds MaxSeries
// series, new keys get the shared overflow series, whose calls
// infergate_series_overflow_total counts; so do keys whose Model, Version
// or Method is longer than MaxLabelBytes or not valid UTF-8. A key equal
// to OverflowKey always gets the overflow series. Finding an existing
// series takes no lock.
//
// Do not keep the *Series: a series idle for IdleTimeout is dropped, and
// a dropped series refuses calls. Record looks the series up per call.
func (r *Registry) lookup(key SeriesKey) (*Series, int) {
	if s := r.state.Load().m[key]; s != nil {
		return s, -1
	}
	return r.create(key)
}

// create is lookup's slow path: validate the key, then find or add its
// series under the lock.
func (r *Registry) create(key SeriesKey) (*Series, int) {
	if key == OverflowKey {
		return r.overflow, overflowMaxSeries
	}
	if why := r.badLabels(key); why >= 0 {
		return r.overflow, why
	}
	if r.full.Load() {
		return r.overflow, overflowMaxSeries
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state.Load()
	if s := st.m[key]; s != nil {
		return s, -1
	}
	if len(st.m) >= r.cfg.maxSeries {
		r.full.Store(true)
		return r.overflow, overflowMaxSeries
	}
	s := r.newSeries(key)
	s.lastTick = int(r.tick.Load()) // published by the Store below
	g := slowGroup{key.Model, key.Version}
	if s.slow = st.slow[g]; s.slow == nil {
		s.slow = newSlowKeeper(g, r.cfg.slowCalls, r.cfg.slowSteps)
	}

	i, _ := slices.BinarySearchFunc(st.list, key, func(e *Series, k SeriesKey) int {
		switch {
		case e.key.less(k):
			return -1
		case k.less(e.key):
			return 1
		}
		return 0
	})
	next := newState(slices.Insert(slices.Clone(st.list), i, s))
	next.carried = st.carried
	r.state.Store(next)
	return s, -1
}

// badLabels returns why key's client-supplied labels cannot be label
// values, or -1 when they can.
func (r *Registry) badLabels(key SeriesKey) int {
	for _, v := range [...]string{key.Model, key.Version, key.Method} {
		if len(v) > r.cfg.maxLabelBytes {
			return overflowTooLong
		}
		if !utf8.ValidString(v) {
			return overflowBadUTF8
		}
	}
	return -1
}

// Record records one finished call under key. A call the upstream
// answered NotFound or Unimplemented for a model (or, for calls without a
// model, a method) that has no series of its own is recorded under
// UnknownLabel, so junk names cannot take series.
func (r *Registry) Record(key SeriesKey, sm Sample) {
	if sm.Code == "NotFound" || sm.Code == "Unimplemented" {
		st := r.state.Load()
		switch {
		case key.Model != "" && st.models[key.Model] == 0:
			key.Model, key.Version = UnknownLabel, ""
		case key.Model == "" && sm.Code == "Unimplemented" && st.methods[key.Method] == 0:
			key.Method = UnknownLabel
		}
	}
	for {
		s, why := r.lookup(key)
		if s.record(sm) {
			if why >= 0 {
				r.overflowBy[why].Add(1)
			}
			return
		}
		// The series was dropped as we found it: wait for the drop to
		// finish (it holds mu), then look again.
		r.mu.Lock()
		r.mu.Unlock()
	}
}

// InFlight returns the in-flight gauge of an upstream, creating it on first
// use; keep it and call Inc/Dec around each call.
func (r *Registry) InFlight(upstream string) *Gauge {
	r.inflightMu.Lock()
	defer r.inflightMu.Unlock()
	g := r.inflight[upstream]
	if g == nil {
		g = &Gauge{}
		r.inflight[upstream] = g
	}
	return g
}

// Run rotates the windows every slice length until ctx ends. When the
// clock shows that ticks were missed (a stalled process), it rotates once
// per missed slice so windows keep their length. Tests run it under
// testing/synctest.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.slice)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := r.cfg.now()
			r.rotateTo(now)
			r.notifyRotated(now)
		}
	}
}

// Rotations returns a channel that receives the clock's time after each
// rotation Run makes, so that a reader of fresh slices (the alert engine)
// reads them the moment they complete instead of up to a slice later. A
// reader that lags misses ticks rather than slowing the rotation.
func (r *Registry) Rotations() <-chan time.Time {
	ch := make(chan time.Time, 1)
	r.subMu.Lock()
	r.subs = append(r.subs, ch)
	r.subMu.Unlock()
	return ch
}

func (r *Registry) notifyRotated(now time.Time) {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	for _, ch := range r.subs {
		select {
		case ch <- now:
		default:
		}
	}
}

// rotateTo rotates once, plus once per whole slice the clock says was
// missed since the last rotation, at most enough to empty every window.
func (r *Registry) rotateTo(now time.Time) {
	r.winMu.Lock()
	defer r.winMu.Unlock()
	n := 1
	if behind := now.Sub(r.lastRotate) - r.cfg.slice; behind >= r.cfg.slice {
		n += int(behind / r.cfg.slice)
	}
	n = min(n, r.cfg.slicesPerMinute*(coarseSlots+1))
	for range n {
		r.rotateLocked()
	}
	r.lastRotate = now
}

// Rotate advances the windows by one slice now, for callers that own time
// (tests, replays); Run rotates on its own ticker.
func (r *Registry) Rotate() {
	r.winMu.Lock()
	defer r.winMu.Unlock()
	r.rotateLocked()
	r.lastRotate = r.cfg.now()
}

func (r *Registry) rotateLocked() {
	r.ticks++
	r.tick.Store(int64(r.ticks))
	minuteDone := r.ticks%r.cfg.slicesPerMinute == 0
	var idle []*Series
	for _, s := range r.state.Load().list {
		if s.rotate(&r.free, minuteDone) {
			s.lastTick = r.ticks
		} else if r.ticks-s.lastTick >= r.cfg.idleTicks {
			idle = append(idle, s)
		}
	}
	r.overflow.rotate(&r.free, minuteDone)
	if r.ticks%r.cfg.slowTicks == 0 {
		for _, k := range r.state.Load().slow {
			k.rotate(minuteDone)
		}
	}
	if len(idle) > 0 {
		r.drop(idle)
	}
}

// drop removes idle series and frees their memory. A series that took a
// call since its last rotation is kept. Called with winMu held.
func (r *Registry) drop(idle []*Series) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := make(map[*Series]bool, len(idle))
	for _, s := range idle {
		// Mark it dead under every shard lock, so that no Record can be
		// half way into it: a Record after this goes back to the registry.
		// Holding the series' shards also keeps its stream part from
		// being created meanwhile (Series.streamPart).
		for i := range s.shards {
			s.shards[i].mu.Lock()
		}
		sp := s.stream.Load()
		if sp != nil {
			for i := range sp.shards {
				sp.shards[i].mu.Lock()
			}
		}
		busy := sp != nil && sp.busy()
		for i := range s.shards {
			busy = busy || s.shards[i].count > 0
		}
		if !busy {
			s.dead.Store(true)
			gone[s] = true
		}
		if sp != nil {
			for i := range sp.shards {
				sp.shards[i].mu.Unlock()
			}
		}
		for i := range s.shards {
			s.shards[i].mu.Unlock()
		}
	}
	if len(gone) == 0 {
		return
	}
	st := r.state.Load()
	list := make([]*Series, 0, len(st.list)-len(gone))
	for _, s := range st.list {
		if !gone[s] {
			list = append(list, s)
		}
	}
	next := newState(list)
	live := make(map[labelSet]bool, len(list))
	for _, s := range list {
		live[labelsOf(s.key)] = true
	}
	for l, b := range st.carried {
		if live[l] {
			if next.carried == nil {
				next.carried = map[labelSet][2]int64{}
			}
			next.carried[l] = b
		}
	}
	for s := range gone {
		if l := labelsOf(s.key); live[l] {
			t := s.totals() // final: the series is dead
			if next.carried == nil {
				next.carried = map[labelSet][2]int64{}
			}
			b := next.carried[l]
			next.carried[l] = [2]int64{b[0] + t.bytesIn, b[1] + t.bytesOut}
		}
	}
	r.state.Store(next)
	if len(list) < r.cfg.maxSeries {
		r.full.Store(false)
	}
	for s := range gone {
		r.droppedCalls.Add(s.win.calls)
		s.win.release(&r.free)
		if sp := s.stream.Load(); sp != nil {
			sp.release(&r.free)
		}
		if l := labelsOf(s.key); r.durs != nil && !live[l] && l != labelsOf(OverflowKey) {
			delete(r.durs, l)
		}
	}
}

// Snapshot returns the exact-quantile statistics of every series, sorted by
// key; the overflow series comes last, once it has taken a call. The current
// slice is not included: data is at most one slice old.
func (r *Registry) Snapshot() []SeriesSnapshot { return r.snapshot(nil) }

// snapshot is Snapshot of the windows wins says (nil: all); the others'
// Stats are left zero.
func (r *Registry) snapshot(wins *[NumWindows]bool) []SeriesSnapshot {
	at := r.cfg.now()
	list := r.state.Load().list
	m := newMerger()
	out := make([]SeriesSnapshot, 0, len(list)+1)
	r.winMu.RLock()
	defer r.winMu.RUnlock()
	for _, s := range list {
		out = append(out, s.snapshot(m, at, wins))
	}
	if r.overflow.win.calls > 0 || r.overflow.streamSamples() > 0 {
		out = append(out, r.overflow.snapshot(m, at, wins))
	}
	return out
}
