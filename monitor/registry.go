package monitor

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

	// winMu guards every Series.win, free and ticks: Rotate writes, Snapshot
	// reads. The hot path never takes it.
	winMu      sync.RWMutex
	free       packedFree
	ticks      int
	lastRotate time.Time

	inflightMu sync.Mutex
	inflight   map[string]*Gauge

	durations *prometheus.HistogramVec // nil when Options.NoRequestHistogram

	tokens    sync.Pool // *shardToken
	nextToken atomic.Uint32
}

type seriesState struct {
	m    map[SeriesKey]*Series
	list []*Series // sorted by key
}

// NewRegistry returns an empty registry configured by opts.
func NewRegistry(opts Options) *Registry {
	r := &Registry{cfg: opts.config(), inflight: make(map[string]*Gauge)}
	r.tokens.New = func() any { return &shardToken{i: r.nextToken.Add(1) - 1} }
	if r.cfg.promHistogram {
		r.durations = newDurationVec()
	}
	r.state.Store(&seriesState{m: map[SeriesKey]*Series{}})
	r.overflow = r.newSeries(OverflowKey)
	r.overflow.overflow = true
	r.lastRotate = r.cfg.now()
	return r
}

func (r *Registry) newSeries(key SeriesKey) *Series {
	var obs prometheus.Observer
	if r.durations != nil {
		obs = r.durations.WithLabelValues(key.Model, key.Version, key.Method, key.Upstream)
	}
	return newSeries(key, r.cfg.shards, r.cfg.slicesPerMinute, &r.tokens, obs)
}

// Series returns the series for key, creating it if needed. Once the
// registry holds MaxSeries series, new keys get the shared overflow series,
// whose calls infergate_series_overflow_total counts. A key equal to
// OverflowKey always gets the overflow series. Finding an existing series
// takes no lock.
func (r *Registry) Series(key SeriesKey) *Series {
	if s := r.state.Load().m[key]; s != nil {
		return s
	}
	if key == OverflowKey || r.full.Load() {
		return r.overflow
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state.Load()
	if s := st.m[key]; s != nil {
		return s
	}
	if len(st.m) >= r.cfg.maxSeries {
		r.full.Store(true)
		return r.overflow
	}
	s := r.newSeries(key)
	m := make(map[SeriesKey]*Series, len(st.m)+1)
	for k, v := range st.m {
		m[k] = v
	}
	m[key] = s
	i, _ := slices.BinarySearchFunc(st.list, key, func(e *Series, k SeriesKey) int {
		switch {
		case e.key.less(k):
			return -1
		case k.less(e.key):
			return 1
		}
		return 0
	})
	list := slices.Insert(slices.Clone(st.list), i, s)
	r.state.Store(&seriesState{m: m, list: list})
	return s
}

// Record records one finished call: r.Record(key, sm) is
// r.Series(key).Record(sm). Callers on a hot path should keep the *Series.
func (r *Registry) Record(key SeriesKey, sm Sample) { r.Series(key).Record(sm) }

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

// Len returns the number of series, not counting the overflow series.
func (r *Registry) Len() int { return len(r.state.Load().m) }

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
			r.rotateTo(r.cfg.now())
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

// Rotate advances the windows by one slice now. Run calls it on its ticker;
// callers that own time (tests, replays) call it directly.
func (r *Registry) Rotate() {
	r.winMu.Lock()
	defer r.winMu.Unlock()
	r.rotateLocked()
	r.lastRotate = r.cfg.now()
}

func (r *Registry) rotateLocked() {
	r.ticks++
	minuteDone := r.ticks%r.cfg.slicesPerMinute == 0
	for _, s := range r.state.Load().list {
		s.rotate(&r.free, minuteDone)
	}
	r.overflow.rotate(&r.free, minuteDone)
}

// Snapshot returns the exact-quantile statistics of every series, sorted by
// key; the overflow series comes last, once it has taken a call. The current
// slice is not included: data is at most one slice old.
func (r *Registry) Snapshot() []SeriesSnapshot {
	at := r.cfg.now()
	list := r.state.Load().list
	m := newMerger()
	out := make([]SeriesSnapshot, 0, len(list)+1)
	r.winMu.RLock()
	defer r.winMu.RUnlock()
	for _, s := range list {
		out = append(out, s.snapshot(m, at))
	}
	if r.overflow.win.calls > 0 {
		out = append(out, r.overflow.snapshot(m, at))
	}
	return out
}
