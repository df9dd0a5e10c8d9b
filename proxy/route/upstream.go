package route

import "github.com/infergate/infergate/proxy/pool"

// Upstream is what the router reads of one of the proxy's upstreams
// (package proxy's *Upstream): its name, the server it sends to, and its
// pool of endpoints for the status and metrics the router reports. The
// router keys its tables by it and hands it back in a Pick's targets; it
// never sends anything through it.
type Upstream interface {
	// Name is its name, the upstream metric label.
	Name() string
	// Server is the server it sends to now, as a value that changes when
	// it moves, and that server's name: a breaker judges one server.
	Server() (id any, name string)
	Endpoints() []*pool.Endpoint
	Balance() pool.Balance
	SlowEndpoint(model string, now int64) (pool.SlowEndpoint, bool)
	Replicas(model string, now int64) int
}
