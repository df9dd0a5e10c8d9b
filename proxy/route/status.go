package route

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/monitor"
)

// BreakerStatus is one breaker as GET /api/v1/routes shows it: an
// upstream's (Model empty: it opens on failures of the way to the server
// and refuses every model there) or a model's on an upstream (it opens on
// that model's failures there and refuses that model only).
type BreakerStatus struct {
	Upstream string `json:"upstream"`
	Model    string `json:"model,omitempty"`
	State    string `json:"state"`
	// Calls and Failures are counted over the breaker's window while it is
	// closed; Consecutive is the failures since the last success.
	Calls       int64      `json:"calls"`
	Failures    int64      `json:"failures"`
	Consecutive int64      `json:"consecutive_failures"`
	OpenUntil   *time.Time `json:"open_until,omitempty"`
	Opened      uint64     `json:"times_opened"`
}

// RouteStatus is one model's route as GET /api/v1/routes shows it.
type RouteStatus struct {
	Model string `json:"model"`
	// Route is where its calls go now: primary, fallback or cascade.
	Route string `json:"route"`
	// Why says what holds it there (breaker, alert, operator); empty on
	// the configured route.
	Why string `json:"why,omitempty"`
	// Reason is the x-infergate-route-reason of the calls the route
	// sends to the fallback now (breaker_open, alert, forced, slow_start);
	// empty on the configured route.
	Reason   string `json:"reason,omitempty"`
	Forced   string `json:"forced"`
	Alert    string `json:"alert,omitempty"`
	Primary  string `json:"primary_upstream"`
	Breaker  string `json:"primary_breaker,omitempty"`
	Fallback string `json:"fallback,omitempty"`
	// Since is when the route last changed; Changes counts the changes.
	Since      *time.Time `json:"since,omitempty"`
	Changes    uint64     `json:"changes"`
	HedgeAfter string     `json:"hedge_after,omitempty"`
	// HedgeEvidence says whether a primary still unanswered at an
	// automatic hedge delay counts as slow for its breaker: "learning
	// (N of M calls)" until the primary's tail has as many calls behind
	// it as a p99.9 needs (meanwhile only a hang counts), then "yes".
	// Empty without automatic hedging.
	HedgeEvidence string     `json:"hedge_evidence,omitempty"`
	P50Ms         float64    `json:"primary_p50_ms,omitempty"`
	P99Ms         float64    `json:"primary_p99_ms,omitempty"`
	Calls         RouteCalls `json:"calls"`
}

// RouteCalls are a model's call counters since start.
type RouteCalls struct {
	Primary          uint64            `json:"primary"`
	Fallback         uint64            `json:"fallback"`
	FallbackBy       map[string]uint64 `json:"fallback_by_reason,omitempty"`
	CascadeEdge      uint64            `json:"cascade_edge"`
	CascadeEscalated uint64            `json:"cascade_escalated"`
	Hedges           uint64            `json:"hedges"`
	HedgesWon        uint64            `json:"hedges_won"`
	Retries          uint64            `json:"retries"`
	RetriesWon       uint64            `json:"retries_won"`
	Shed             map[string]uint64 `json:"shed,omitempty"`
	Degraded         uint64            `json:"degraded_responses"`
}

// Status returns every routed model and every breaker, sorted by name.
func (r *Router) Status() ([]RouteStatus, []BreakerStatus) {
	var routes []RouteStatus
	for name, mr := range r.table.Load().models {
		d := r.mode(mr)
		rs := RouteStatus{Model: name, Route: d.route, Why: d.why, Reason: d.reason, Forced: mr.forced, Alert: mr.alert,
			Changes: mr.live.changes.Load()}
		if mr.cfg.Upstream != nil {
			rs.Primary = mr.cfg.Upstream.Name()
		} else {
			rs.Primary = "(default upstream)"
		}
		if mr.primary != nil {
			rs.Breaker = mr.primary.Gate().String()
		}
		if mr.cfg.Fallback != nil {
			rs.Fallback = r.fallbackName(name)
			if !mr.cfg.NonIdempotent && mr.cfg.HedgeAfter >= 0 {
				rs.HedgeAfter = mr.HedgeAfter().String()
				if mr.cfg.HedgeAfter == 0 && mr.HedgeAfter() == 0 {
					rs.HedgeAfter = "auto: half the deadline until the primary's p99.9 is known"
				}
				if mr.cfg.HedgeAfter == 0 {
					rs.HedgeEvidence = "yes"
					if !mr.live.tailKnown() {
						rs.HedgeEvidence = fmt.Sprintf("learning (%d of %d calls)", mr.live.tailCalls.Load(), MinTailCalls)
					}
				}
			}
		}
		if ns := mr.live.since.Load(); ns > 0 {
			t := time.Unix(0, ns)
			rs.Since = &t
		}
		rs.P50Ms = float64(mr.live.p50.Load()) / 1e6
		rs.P99Ms = float64(mr.live.p99.Load()) / 1e6
		ctr := &mr.live.Counters
		rs.Calls = RouteCalls{Primary: ctr.Primary.Load(), Fallback: ctr.Fallback.Load(),
			CascadeEdge: ctr.CascadeEdge.Load(), CascadeEscalated: ctr.CascadeEscalated.Load(),
			Hedges: ctr.Hedges.Load(), HedgesWon: ctr.HedgesWon.Load(),
			Retries: ctr.Retries.Load(), RetriesWon: ctr.RetriesWon.Load(), Degraded: ctr.Degraded.Load()}
		for i, reason := range fallbackReasons {
			if n := ctr.fallbackBy[i].Load(); n > 0 {
				if rs.Calls.FallbackBy == nil {
					rs.Calls.FallbackBy = map[string]uint64{}
				}
				rs.Calls.FallbackBy[reason] = n
			}
		}
		for i, reason := range shedReasons {
			if n := ctr.shed[i].Load(); n > 0 {
				if rs.Calls.Shed == nil {
					rs.Calls.Shed = map[string]uint64{}
				}
				rs.Calls.Shed[reason] = n
			}
		}
		routes = append(routes, rs)
	}
	slices.SortFunc(routes, func(a, b RouteStatus) int { return strings.Compare(a.Model, b.Model) })
	var brs []BreakerStatus
	for _, b := range r.table.Load().allBreakers() {
		calls, failures := b.Counts()
		bs := BreakerStatus{Upstream: b.Name(), Model: b.Model(), State: b.State().String(), Calls: calls, Failures: failures,
			Consecutive: b.Consecutive(), Opened: b.Transitions(BreakerOpen)}
		if b.State() == BreakerOpen {
			t := time.Unix(0, b.OpenUntil())
			bs.OpenUntil = &t
		}
		brs = append(brs, bs)
	}
	return routes, brs
}

// allBreakers returns the table's breakers, each upstream's transport
// breaker before its models', by upstream and model.
func (t *routeTable) allBreakers() []*Breaker {
	var bs []*Breaker
	for _, b := range t.breakers {
		bs = append(bs, b)
	}
	for _, b := range t.modelBreakers {
		bs = append(bs, b)
	}
	t.directed.Range(func(_, v any) bool { bs = append(bs, v.(*Breaker)); return true })
	slices.SortFunc(bs, func(a, b *Breaker) int {
		if c := strings.Compare(a.Name(), b.Name()); c != 0 {
			return c
		}
		return strings.Compare(a.Model(), b.Model())
	})
	return bs
}

var (
	breakerStateDesc = prometheus.NewDesc("infergate_breaker_state",
		"Circuit breaker state: 0 closed, 1 half-open, 2 open. model is empty for an upstream's breaker (failures of the way to the server; it refuses every model there), set for a model's breaker on that upstream (its failures there; it refuses that model only).",
		[]string{"upstream", "model"}, nil)
	breakerTransDesc = prometheus.NewDesc("infergate_breaker_transitions_total",
		"Circuit breaker state changes, by the state entered; model as in infergate_breaker_state.", []string{"upstream", "model", "to"}, nil)
	routeCallsDesc = prometheus.NewDesc("infergate_route_calls_total",
		"Inference calls of routed models by the route that answered: primary, fallback, cascade_edge, cascade_escalated.",
		[]string{"model", "route"}, nil)
	fallbackDesc = prometheus.NewDesc("infergate_fallback_calls_total",
		"Calls sent to a model's fallback, by reason: breaker_open, slow_start, alert, forced, retry, hedge, shed_in_flight, shed_deadline, shed_queue_full.",
		[]string{"model", "reason"}, nil)
	degradedDesc = prometheus.NewDesc("infergate_degraded_responses_total",
		"Successful answers from a model's fallback instead of the model the client asked for (marked x-infergate-route: fallback).",
		[]string{"model"}, nil)
	shedDesc = prometheus.NewDesc("infergate_shed_calls_total",
		"Calls rejected at once with RESOURCE_EXHAUSTED (no fallback to take them), by reason: shed_in_flight, shed_deadline.",
		[]string{"model", "reason"}, nil)
	hedgesDesc = prometheus.NewDesc("infergate_hedges_total",
		"Calls still unanswered by the primary at the hedge delay and sent to the fallback too, by outcome: won (the fallback answered), lost.",
		[]string{"model", "outcome"}, nil)
	retriesDesc = prometheus.NewDesc("infergate_retries_total",
		"Calls that failed on the primary and were retried on the fallback, by outcome: won (the fallback answered), lost.",
		[]string{"model", "outcome"}, nil)
	routeChangesDesc = prometheus.NewDesc("infergate_route_changes_total",
		"Changes of a model's route (primary, fallback, cascade).", []string{"model"}, nil)
	routeModeDesc = prometheus.NewDesc("infergate_route_mode",
		"1 for the route a model's calls take now.", []string{"model", "route"}, nil)
	budgetDeniedDesc = prometheus.NewDesc("infergate_retry_budget_exhausted_total",
		"Retries and hedges not made because the retry budget was spent.", nil, nil)
)

// Collector returns the router's metrics for a Prometheus registry.
func (r *Router) Collector() prometheus.Collector { return routerCollector{r} }

type routerCollector struct{ r *Router }

func (c routerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{breakerStateDesc, breakerTransDesc, routeCallsDesc, fallbackDesc,
		degradedDesc, shedDesc, hedgesDesc, retriesDesc, routeChangesDesc, routeModeDesc, budgetDeniedDesc} {
		ch <- d
	}
	for _, d := range endpointDescs {
		ch <- d
	}
}

func (c routerCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.r
	counter := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	for _, b := range r.table.Load().allBreakers() {
		ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, float64(b.State()), b.Name(), b.Model())
		for _, s := range []BreakerState{BreakerClosed, BreakerHalfOpen, BreakerOpen} {
			counter(breakerTransDesc, b.Transitions(s), b.Name(), b.Model(), s.String())
		}
	}
	for name, mr := range r.table.Load().models {
		ctr := &mr.live.Counters
		counter(routeCallsDesc, ctr.Primary.Load(), name, monitor.RoutePrimary)
		if mr.cfg.Fallback == nil {
			continue
		}
		counter(routeCallsDesc, ctr.Fallback.Load(), name, monitor.RouteFallback)
		if mr.cfg.Cascade != nil {
			counter(routeCallsDesc, ctr.CascadeEdge.Load(), name, monitor.RouteCascadeEdge)
			counter(routeCallsDesc, ctr.CascadeEscalated.Load(), name, monitor.RouteCascadeEscalated)
		}
		for i, reason := range fallbackReasons {
			counter(fallbackDesc, ctr.fallbackBy[i].Load(), name, reason)
		}
		counter(degradedDesc, ctr.Degraded.Load(), name)
		counter(hedgesDesc, ctr.HedgesWon.Load(), name, "won")
		counter(hedgesDesc, ctr.Hedges.Load()-min(ctr.HedgesWon.Load(), ctr.Hedges.Load()), name, "lost")
		counter(retriesDesc, ctr.RetriesWon.Load(), name, "won")
		counter(retriesDesc, ctr.Retries.Load()-min(ctr.RetriesWon.Load(), ctr.Retries.Load()), name, "lost")
		counter(routeChangesDesc, mr.live.changes.Load(), name)
		mode := r.mode(mr).route
		for _, m := range []string{RoutePrimaryMode, RouteFallbackMode, RouteCascadeMode} {
			v := 0.0
			if m == mode {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(routeModeDesc, prometheus.GaugeValue, v, name, m)
		}
	}
	for name, mr := range r.table.Load().models {
		for i, reason := range shedReasons {
			counter(shedDesc, mr.live.Counters.shed[i].Load(), name, reason)
		}
	}
	counter(budgetDeniedDesc, r.table.Load().budget.Denied())
	r.collectEndpoints(ch)
}
