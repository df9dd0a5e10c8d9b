package proxy

import "github.com/infergate/infergate/proxy/pool"

// The pool's types and settings under the names this package's users
// have always had (package pool holds them).

type (
	// Endpoint is one replica of an upstream (pool.Endpoint).
	Endpoint = pool.Endpoint
	// Balance is how an upstream with several endpoints picks one per
	// call (pool.Balance).
	Balance = pool.Balance
	// EndpointStatus is one endpoint on GET /api/v1/endpoints.
	EndpointStatus = pool.EndpointStatus
	// ModelLatency is one endpoint's recent latency for one model.
	ModelLatency = pool.ModelLatency
	// SlowEndpoint is an endpoint much slower than its pool for a model.
	SlowEndpoint = pool.SlowEndpoint
)

// Balances and their names.
const (
	BalanceLatency      = pool.BalanceLatency
	BalanceLeastRequest = pool.BalanceLeastRequest
	BalanceRoundRobin   = pool.BalanceRoundRobin
)

// Balances are the names of the Balance values, as YAML spells them.
var Balances = pool.Balances

// ParseBalance reads a Balance by name; "" is the default.
func ParseBalance(s string) (Balance, error) { return pool.ParseBalance(s) }

// Endpoint states on the API.
const (
	EndpointUp      = pool.EndpointUp
	EndpointDown    = pool.EndpointDown
	EndpointEjected = pool.EndpointEjected
)

const (
	// DefaultEndpointSlowStart is UpstreamOptions.SlowStart's default.
	DefaultEndpointSlowStart = pool.DefaultEndpointSlowStart
	// DefaultResolveEvery is how often a dns:/// upstream's name is
	// resolved again.
	DefaultResolveEvery = pool.DefaultResolveEvery
)
