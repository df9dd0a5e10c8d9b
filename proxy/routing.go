package proxy

import (
	"errors"
	"strings"
	"time"

	"github.com/infergate/infergate/proxy/pool"
	"github.com/infergate/infergate/proxy/route"
)

// The part of routing that opens connections: a route.Plan's upstreams
// dialled (OpenRouting), or kept across a reload (ReopenRouting).

// Routing is what OpenRouting opened: the upstreams, and the router's
// settings over them.
type Routing struct {
	// Default is the Director's upstream: upstream, else the first of
	// upstreams.
	Default *Upstream
	// DefaultAddress is Default's address.
	DefaultAddress string
	// Upstreams are every upstream opened, once each; Close closes them.
	Upstreams []*Upstream
	// Router holds the Routes, Breakers and Budget; the front end adds
	// Latency, Logger and the rest. With no Routes and no Breakers there
	// is nothing to route.
	Router route.RouterOptions

	// keys say what each of Upstreams was dialled as, so that ReopenRouting
	// keeps the connections of an upstream a reload did not change.
	keys []upstreamKey
}

// upstreamKey is what an upstream was dialled as.
type upstreamKey struct {
	name, address string
	conns         int
	balance       Balance
	slowStart     time.Duration
}

// OpenRouting dials every upstream of p with dial (DialUpstream, or a test's),
// each with opts but its own Name and, where upstreams[].conns gives it,
// Conns (opts.Conns otherwise), and returns them with the router's
// settings. On an error it closes those it opened.
func OpenRouting(p *route.Plan, opts UpstreamOptions, dial func(target string, opts UpstreamOptions) (*Upstream, error)) (*Routing, error) {
	rt := &Routing{Router: route.RouterOptions{Breakers: map[route.Upstream]BreakerConfig{}, Budget: p.Budget}}
	for i, pu := range p.Upstreams {
		o := opts
		o.Name = pu.Name
		// The default upstream can move at a reload (Upstream.Move);
		// the others are dialled again when their address changes.
		o.Movable = i == 0
		if pu.Conns > 0 {
			o.Conns = pu.Conns
		}
		o.Balance = pu.Balance
		o.SlowStart = pu.SlowStart
		up, err := dial(pu.Address, o)
		if err != nil {
			return nil, errors.Join(err, rt.Close())
		}
		up.SetAffinityHeader(pu.Affinity) // live: a reload changes it on a kept upstream
		rt.Upstreams = append(rt.Upstreams, up)
		rt.keys = append(rt.keys, upstreamKey{pu.Name, pu.Address, o.Conns, pu.Balance, pu.SlowStart})
		if pu.Breaker != nil {
			rt.Router.Breakers[up] = *pu.Breaker
		}
	}
	if len(rt.Upstreams) > 0 {
		rt.Default, rt.DefaultAddress = rt.Upstreams[0], p.Upstreams[0].Address
	}
	for _, up := range rt.Upstreams {
		rt.Router.Upstreams = append(rt.Router.Upstreams, up)
	}
	for _, pr := range p.Routes {
		rc := pr.Config
		rc.Upstream = rt.Upstreams[pr.Primary]
		if rc.Fallback != nil {
			fb := *rc.Fallback
			if pr.Fallback >= 0 {
				fb.Upstream = rt.Upstreams[pr.Fallback]
			}
			rc.Fallback = &fb
		}
		rt.Router.Routes = append(rt.Router.Routes, rc)
	}
	return rt, nil
}

// ReopenRouting is OpenRouting for a reload: the default upstream stays prev's (the
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
func ReopenRouting(p *route.Plan, prev *Routing, opts UpstreamOptions, dial func(target string, opts UpstreamOptions) (*Upstream, error)) (next *Routing, dropped []*Upstream, err error) {
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
	rt, err := OpenRouting(p, opts, reuse)
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

// PlainEndpoints says whether target is one or more host:port separated
// by commas, without a scheme: an upstream whose endpoints can change
// while it serves.
func PlainEndpoints(target string) bool {
	for _, a := range strings.Split(target, ",") {
		if !pool.PlainHostPort(a) {
			return false
		}
	}
	return true
}

// Close closes every upstream opened.
func (rt *Routing) Close() error {
	var errs []error
	for _, u := range rt.Upstreams {
		errs = append(errs, u.Close())
	}
	return errors.Join(errs...)
}
