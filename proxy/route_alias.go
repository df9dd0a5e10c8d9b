package proxy

import "github.com/infergate/infergate/proxy/route"

// The breakers' and the retry budget's settings under the names this
// package's users have always had (package route holds them).

type (
	// BreakerConfig says when an upstream's circuit breaker opens and
	// how it closes again.
	BreakerConfig = route.BreakerConfig
	// BreakerState is a breaker's state.
	BreakerState = route.BreakerState
	// BudgetConfig is the retry budget's settings.
	BudgetConfig = route.BudgetConfig
)

// The breaker states.
const (
	BreakerClosed   = route.BreakerClosed
	BreakerHalfOpen = route.BreakerHalfOpen
	BreakerOpen     = route.BreakerOpen
)

// DefaultFailureCodes are the codes that count as an upstream's failure
// when BreakerConfig.FailureCodes is empty.
var DefaultFailureCodes = route.DefaultFailureCodes
