package proxy

import "github.com/infergate/infergate/proxy/pool"

// What the router says of its upstreams' pools.

// SlowEndpoint returns the endpoint much slower than the rest of its
// pool for model, the slowest if several are; false when none is.
func (r *Router) SlowEndpoint(model string) (pool.SlowEndpoint, bool) {
	t := r.opts.Now().UnixNano()
	var found pool.SlowEndpoint
	ok := false
	for _, up := range r.table.Load().upstreams {
		if s, yes := up.SlowEndpoint(model, t); yes && (!ok || s.Ratio() > found.Ratio()) {
			s.Upstream = up.Name()
			found, ok = s, true
		}
	}
	return found, ok
}

// Replicas is how many endpoints of the upstream named upstream may take
// a call of model now (up, not ejected, holding it): the batcher runs
// its policy's slots once per replica. 1 for an upstream it does not know
// or that is no pool.
func (r *Router) Replicas(upstream, model string) int {
	t := r.opts.Now().UnixNano()
	for _, up := range r.table.Load().upstreams {
		if up.Name() == upstream {
			return up.Pool.Replicas(model, t)
		}
	}
	return 1
}
