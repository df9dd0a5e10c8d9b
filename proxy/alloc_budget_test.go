package proxy

import (
	"testing"
)

// The most heap allocations the proxy may add to one small unary call:
// BenchmarkProxyUnary/128B less BenchmarkDirectUnary/128B, the same call
// without the proxy (both run the client and the echo backend in this
// process, so the difference is the proxy's own).
const (
	// relayAllocBudget is the fast path's (fastpath.go, h2relay): 46
	// when set (154 through grpc-go before it); 34 once a connection's
	// non-blocking write stopped allocating its callback each time.
	relayAllocBudget = 38
	// grpcAllocBudget is the gRPC path's (fast_path off, or a call the
	// relay hands on): its server stream, its upstream stream, the
	// metadata copies both ways and the proxy's bookkeeping. 141 when
	// set (154 before the changes docs/benchmarks.md lists under "Where
	// the proxy's time goes"), all but one inside grpc-go.
	grpcAllocBudget = 145
)

// TestProxyAllocBudget guards both budgets, so a change that adds
// allocations to every call fails here rather than going unnoticed in a
// benchmark nobody ran. Allocation counts under -race differ, so make test
// runs this test a second time without -race (the test-allocs target).
func TestProxyAllocBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race; `make test-allocs` runs this without it")
	}
	if testing.Short() {
		t.Skip("runs three benchmarks")
	}
	run := func(proxied, relay bool, endpoints int) float64 {
		defer func(v bool, n int) { grpcPathOnly, benchEndpoints = v, n }(grpcPathOnly, benchEndpoints)
		grpcPathOnly, benchEndpoints = !relay, endpoints
		r := testing.Benchmark(func(b *testing.B) {
			direct, via := benchEnv(b)
			cc := direct
			if proxied {
				cc = via
			}
			benchUnary(b, cc, benchSizes[0].raw)
		})
		if r.N == 0 {
			t.Fatal("benchmark did not run")
		}
		return float64(r.MemAllocs) / float64(r.N)
	}
	direct := run(false, false, 1)
	for _, path := range []struct {
		name      string
		relay     bool
		budget    int
		endpoints int
	}{
		{"fast path", true, relayAllocBudget, 1},
		{"gRPC path", false, grpcAllocBudget, 1},
		// A pool's pick allocates nothing either.
		{"fast path, a pool of 4", true, relayAllocBudget, 4},
		{"gRPC path, a pool of 4", false, grpcAllocBudget, 4},
	} {
		proxied := run(true, path.relay, path.endpoints)
		added := proxied - direct
		t.Logf("%s: allocations per small unary call: %.1f direct, %.1f proxied, %.1f added by the proxy (budget %d)",
			path.name, direct, proxied, added, path.budget)
		if added > float64(path.budget) {
			t.Errorf("%s: the proxy adds %.1f allocations per call, over its budget of %d: see `go test -run '^$' -bench 'Unary$' -benchmem -memprofile m.out ./proxy`",
				path.name, added, path.budget)
		}
	}
}
