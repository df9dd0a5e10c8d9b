package proxy

import (
	"errors"
	"fmt"
	"github.com/infergate/infergate/proxy/route"
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
	t := &routeTable{models: map[string]*modelRoute{}, breakers: map[*Upstream]*route.Breaker{},
		modelBreakers: map[modelKey]*route.Breaker{}, directed: new(sync.Map), ndirected: new(atomic.Int64),
		upstreams: opts.Upstreams}
	addBreaker := func(up *Upstream, cfg BreakerConfig) error {
		if up == nil || t.breakers[up] != nil {
			return nil
		}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("upstream %q: breaker: %w", up.Name(), err)
		}
		d := up.dest.Load()
		if prev != nil {
			// A breaker judges one server: an upstream that moved
			// (Upstream.Move) gets a new one, closed.
			if old := prev.breakers[up]; old != nil && old.Owner() == any(d) && reflect.DeepEqual(old.Config(), cfg.WithDefaults()) {
				t.breakers[up] = old
				return nil
			}
		}
		b := route.NewBreaker(d.name, "", cfg, opts.Now, r.breakerChanged)
		b.Link(d, nil)
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
			if old := prev.modelBreakers[k]; old != nil && old.Conn() == conn && old.Owner() == any(k.up.dest.Load()) &&
				reflect.DeepEqual(old.Config(), cfg.WithDefaults()) {
				t.modelBreakers[k] = old
				return
			}
		}
		t.modelBreakers[k] = newModelBreaker(k, conn, cfg, opts.Now, r.breakerChanged)
	}
	for _, up := range slices.SortedFunc(maps.Keys(opts.Breakers), func(a, b *Upstream) int { return cmpString(a.Name(), b.Name()) }) {
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
		mr := &modelRoute{cfg: &rc, forced: ForceAuto}
		if old := prevRoute(prev, rc.Model); old != nil {
			mr.live = old.live
			if old.forced != ForceFallback || rc.Fallback != nil {
				mr.forced = old.forced
			}
			if rc.Fallback != nil {
				mr.alert = old.alert
			}
		} else {
			mr.live = &routeLive{}
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
		t.budget = route.NewRetryBudget(opts.Budget, opts.Now)
	}
	if prev != nil {
		// A model's breaker made at its first call keeps its state while
		// its upstream's breaker does and no route now gives it one.
		prev.directed.Range(func(k, v any) bool {
			b := v.(*route.Breaker)
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
func newModelBreaker(k modelKey, conn *route.Breaker, cfg BreakerConfig, now func() time.Time, onChange func(*route.Breaker, BreakerState, BreakerState)) *route.Breaker {
	d := k.up.dest.Load()
	b := route.NewBreaker(d.name, k.model, cfg, now, onChange)
	b.Link(d, conn)
	return b
}

func prevRoute(prev *routeTable, model string) *modelRoute {
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

// Reopen is Open for a reload: the default upstream stays prev's (the
// Director's; the caller moves it, Upstream.Move, when its address
// changed: next's DefaultAddress is the new one), an upstream whose
// name, address and connection count are prev's is prev's (its
// connections and calls carry on), one whose list of endpoints alone
// changed is prev's with the new list (SetEndpoints: the endpoints kept
// keep their connections, the removed ones drain), and only the others
// are dialled.
// dropped are prev's upstreams the new plan no longer uses: the caller
// closes them once the calls on them have ended. On an error it closes
// what it dialled and prev is untouched.
func (p *RoutePlan) Reopen(prev *Routing, opts UpstreamOptions, dial func(target string, opts UpstreamOptions) (*Upstream, error)) (next *Routing, dropped []*Upstream, err error) {
	old := map[upstreamKey]*Upstream{}
	for i, up := range prev.Upstreams {
		if i > 0 && i < len(prev.keys) {
			old[prev.keys[i]] = up
		}
	}
	kept := map[*Upstream]bool{}
	var dialled []*Upstream
	var moves []func() error // endpoint lists to change once the plan holds
	first := true
	reuse := func(target string, o UpstreamOptions) (*Upstream, error) {
		if first {
			first = false
			kept[prev.Default] = true
			return prev.Default, nil
		}
		key := upstreamKey{o.Name, target, o.Conns, o.Balance, o.SlowStart}
		if up := old[key]; up != nil && !kept[up] {
			kept[up] = true
			return up, nil
		}
		for k, up := range old {
			if k.name == key.name && k.conns == key.conns && k.balance == key.balance && k.slowStart == key.slowStart &&
				!kept[up] && up.dialer != nil && up.dns == "" && PlainEndpoints(k.address) && PlainEndpoints(target) {
				kept[up] = true
				moves = append(moves, func() error { return up.SetEndpoints(strings.Split(target, ","), endpointDrain) })
				return up, nil
			}
		}
		up, err := dial(target, o)
		if err == nil {
			dialled = append(dialled, up)
		}
		return up, err
	}
	rt, err := p.Open(opts, reuse)
	for _, move := range moves {
		if err != nil {
			break
		}
		err = move() // dials the new endpoints: fails only on a bad address
	}
	if err != nil {
		for _, up := range dialled {
			up.Close()
		}
		return nil, nil, err
	}
	for _, up := range prev.Upstreams {
		if !kept[up] {
			dropped = append(dropped, up)
		}
	}
	return rt, dropped, nil
}
