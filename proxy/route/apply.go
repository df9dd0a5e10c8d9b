package route

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// buildTable makes the table of opts. With prev, what the new table
// shares with it carries over: the breaker of an upstream whose breaker
// settings did not change and that did not move (its state, window and
// trips), and of a model there whose upstream's breaker carried over; the
// retry budget when its settings did not change (its tokens); and each
// model's live counters, forced mode and the alert holding it on its
// fallback when the model keeps a route (and, for those two, a fallback).
func (r *Router) buildTable(opts RouterOptions, prev *routeTable) (*routeTable, error) {
	t := &routeTable{models: map[string]*ModelRoute{}, breakers: map[Upstream]*Breaker{},
		modelBreakers: map[modelKey]*Breaker{}, directed: new(sync.Map), ndirected: new(atomic.Int64),
		upstreams: opts.Upstreams}
	addBreaker := func(up Upstream, cfg BreakerConfig) error {
		if up == nil || t.breakers[up] != nil {
			return nil
		}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("upstream %q: breaker: %w", up.Name(), err)
		}
		server, name := up.Server()
		if prev != nil {
			// A breaker judges one server: an upstream that moved
			// (proxy's Upstream.Move) gets a new one, closed.
			if old := prev.breakers[up]; old != nil && old.Owner() == server && reflect.DeepEqual(old.Config(), cfg.WithDefaults()) {
				t.breakers[up] = old
				return nil
			}
		}
		b := NewBreaker(name, "", cfg, opts.Now, r.breakerChanged)
		b.Link(server, nil)
		t.breakers[up] = b
		return nil
	}
	// A model's breaker on an upstream has the upstream's settings.
	addModelBreaker := func(k modelKey) {
		if k.up == nil || t.modelBreakers[k] != nil {
			return
		}
		conn := t.breakers[k.up]
		cfg := opts.Breakers[k.up]
		if prev != nil {
			if old := prev.modelBreakers[k]; old != nil && old.Conn() == conn && old.Owner() == serverOf(k.up) &&
				reflect.DeepEqual(old.Config(), cfg.WithDefaults()) {
				t.modelBreakers[k] = old
				return
			}
		}
		t.modelBreakers[k] = newModelBreaker(k, conn, cfg, opts.Now, r.breakerChanged)
	}
	for _, up := range slices.SortedFunc(maps.Keys(opts.Breakers), func(a, b Upstream) int { return strings.Compare(a.Name(), b.Name()) }) {
		if err := addBreaker(up, opts.Breakers[up]); err != nil {
			return nil, err
		}
	}
	for i := range opts.Routes {
		rc := opts.Routes[i]
		if rc.Fallback != nil {
			// Both ends of a fallback get a breaker with the defaults
			// unless configured: the primary's trips the route, the
			// fallback's answers at once while the fallback is down too
			// (and keeps hedges off it) instead of holding calls on it.
			if err := addBreaker(rc.Upstream, BreakerConfig{}); err != nil {
				return nil, err
			}
			if err := addBreaker(rc.Fallback.Upstream, BreakerConfig{}); err != nil {
				return nil, err
			}
		}
		if rc.Fallback != nil || t.breakers[rc.Upstream] != nil {
			addModelBreaker(modelKey{rc.Upstream, rc.Model})
		}
		if k, ok := fallbackKey(rc.Model, &rc); ok {
			addModelBreaker(k)
		}
		mr := &ModelRoute{cfg: &rc, forced: ForceAuto}
		if old := prevRoute(prev, rc.Model); old != nil {
			mr.live = old.live
			if old.forced != ForceFallback || rc.Fallback != nil {
				mr.forced = old.forced
			}
			if rc.Fallback != nil {
				mr.alert = old.alert
			}
		} else {
			mr.live = &Live{}
			mr.live.lastMode.Store(RoutePrimaryMode)
			mr.live.why.Store("")
			if rc.Cascade != nil {
				mr.live.lastMode.Store(RouteCascadeMode)
			}
		}
		t.models[rc.Model] = mr
	}
	if prev != nil && reflect.DeepEqual(prev.budget.Config(), opts.Budget.WithDefaults()) {
		t.budget = prev.budget
	} else {
		t.budget = NewRetryBudget(opts.Budget, opts.Now)
	}
	if prev != nil {
		// A model's breaker made at its first call keeps its state while
		// its upstream's breaker does and no route now gives it one.
		prev.directed.Range(func(k, v any) bool {
			b := v.(*Breaker)
			if key := k.(modelKey); b.Conn() == t.breakers[key.up] && t.modelBreakers[key] == nil {
				t.directed.Store(key, b)
				t.ndirected.Add(1)
			}
			return true
		})
	}
	r.link(t)
	return t, nil
}

// newModelBreaker makes the breaker of model k.model on upstream k.up,
// watching conn, the upstream's transport breaker (nil: none).
func newModelBreaker(k modelKey, conn *Breaker, cfg BreakerConfig, now func() time.Time, onChange func(*Breaker, BreakerState, BreakerState)) *Breaker {
	server, name := k.up.Server()
	b := NewBreaker(name, k.model, cfg, now, onChange)
	b.Link(server, conn)
	return b
}

// serverOf is the server up sends to now (Upstream.Server).
func serverOf(up Upstream) any {
	server, _ := up.Server()
	return server
}

func prevRoute(prev *routeTable, model string) *ModelRoute {
	if prev == nil {
		return nil
	}
	return prev.models[model]
}

// Apply replaces the routes, breakers and retry budget with those of
// opts (its Routes, Breakers and Budget; the other fields stay as
// NewRouter got them), atomically: a call is routed by the old table or
// the new one, never a mix. State carries over where the configuration
// did not change (see buildTable). It checks opts as NewRouter does and
// changes nothing when they are bad.
func (r *Router) Apply(opts RouterOptions) error {
	if errs := routeProblems(opts.Routes); len(errs) > 0 {
		return fmt.Errorf("proxy: %w", errors.Join(errs...))
	}
	opts.Now = r.opts.Now
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := r.buildTable(opts, r.table.Load())
	if err != nil {
		return err
	}
	r.table.Store(t)
	r.poke()
	return nil
}
