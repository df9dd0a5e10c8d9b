package route

import (
	"fmt"
	"slices"
	"sync/atomic"
)

// Why a call was answered by a route other than its primary; the values of
// grpcwire.HeaderRouteReason and of the reason label of the route metrics.
const (
	ReasonBreaker       = "breaker_open"
	ReasonAlert         = "alert"
	ReasonForced        = "forced"
	ReasonRetry         = "retry"
	ReasonHedge         = "hedge"
	ReasonShedInFlight  = "shed_in_flight"
	ReasonShedDeadline  = "shed_deadline"
	ReasonShedQueueFull = "shed_queue_full"
	ReasonSlowStart     = "slow_start"
	ReasonLowConfidence = "low_confidence"
	ReasonConfident     = "confident"
	ReasonEdgeFailed    = "edge_failed"
	ReasonPrimaryFailed = "primary_failed"
	ReasonPrimarySlow   = "primary_slow"
)

// fallbackReasons lists the reasons a call goes to the fallback, in the
// order of Counters.fallbackBy.
var fallbackReasons = [...]string{ReasonBreaker, ReasonSlowStart, ReasonAlert, ReasonForced, ReasonRetry, ReasonHedge,
	ReasonShedInFlight, ReasonShedDeadline, ReasonShedQueueFull}

// shedReasons lists why a call was rejected, in the order of
// Counters.shed.
var shedReasons = [...]string{ReasonShedInFlight, ReasonShedDeadline}

// Counters are one model's route metrics.
type Counters struct {
	Primary, Fallback, CascadeEdge, CascadeEscalated atomic.Uint64
	fallbackBy                                       [len(fallbackReasons)]atomic.Uint64
	shed                                             [len(shedReasons)]atomic.Uint64
	Hedges, HedgesWon, Retries, RetriesWon           atomic.Uint64
	// Degraded counts successful answers from the fallback model.
	Degraded atomic.Uint64
}

// FellBack counts a call sent to the fallback for reason.
func (c *Counters) FellBack(reason string) {
	if i := slices.Index(fallbackReasons[:], reason); i >= 0 {
		c.fallbackBy[i].Add(1)
	}
}

// WasShed counts a call rejected at once for reason.
func (c *Counters) WasShed(reason string) {
	if i := slices.Index(shedReasons[:], reason); i >= 0 {
		c.shed[i].Add(1)
	}
}

// BreakerOpenError: an upstream's circuit breaker refused the call. Model
// is empty for a model without a route; Fallback marks the breaker of a
// route's fallback upstream.
type BreakerOpenError struct {
	Upstream, Model string
	Fallback        bool
}

func (e *BreakerOpenError) Error() string {
	switch {
	case e.Fallback:
		return fmt.Sprintf("model %s: fallback upstream %s: circuit breaker open; retry later", e.Model, e.Upstream)
	case e.Model != "":
		return fmt.Sprintf("upstream %s: circuit breaker open for model %s; retry later", e.Upstream, e.Model)
	}
	return fmt.Sprintf("upstream %s: circuit breaker open; retry later", e.Upstream)
}

// ShedError: a route rejected the call at once (no fallback to take it).
type ShedError struct {
	Reason string // ReasonShedInFlight, ReasonShedDeadline
	Msg    string
}

func (e *ShedError) Error() string { return e.Msg }
