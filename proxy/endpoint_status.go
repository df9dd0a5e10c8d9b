package proxy

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// EndpointStatus is one endpoint on GET /api/v1/endpoints.
type EndpointStatus struct {
	Upstream string `json:"upstream"`
	Address  string `json:"address"`
	Balance  string `json:"balance"`
	// State is up (the picker may send it calls), down (none of its
	// connections is ready) or ejected (Why says why, until when).
	State        string     `json:"state"`
	Why          string     `json:"why,omitempty"`
	EjectedUntil *time.Time `json:"ejected_until,omitempty"`
	Ejections    int32      `json:"ejections"`
	InFlight     int64      `json:"in_flight"`
	Calls        uint64     `json:"calls"`
	Failed       uint64     `json:"failed"`
	// Models are the models it reported ready; null when it cannot say
	// (or was not asked yet). ModelsAbsent are those it answered
	// NOT_FOUND for lately, left out for them.
	Models       []string `json:"models"`
	ModelsAbsent []string `json:"models_absent,omitempty"`
	// LatencySeconds is the picker's latency cost of the endpoint now:
	// the peak EWMA of its calls' latency, decayed since its last
	// answer; null before its first answer.
	LatencySeconds *float64 `json:"latency_seconds"`
	// ModelLatency is its answers' latency per model over the last 10 to
	// 20 seconds (models with answers in that time only).
	ModelLatency map[string]ModelLatency `json:"model_latency,omitempty"`
}

// ModelLatency is one endpoint's recent latency for one model, read from
// buckets 20 to 25% wide (within 12.5%).
type ModelLatency struct {
	Answers    uint64  `json:"answers"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

// Endpoint states.
const (
	EndpointUp      = "up"
	EndpointDown    = "down"
	EndpointEjected = "ejected"
)

// status is e's state at now.
func (e *Endpoint) status(upstream string, b Balance, now time.Time) EndpointStatus {
	t := now.UnixNano()
	st := EndpointStatus{Upstream: upstream, Address: e.addr, Balance: b.String(), State: EndpointUp,
		Ejections: e.ejections.Load(), InFlight: e.inFlight.Load(), Calls: e.calls.Load(), Failed: e.failed.Load()}
	if st.Address == "" && len(e.conns) > 0 {
		st.Address = e.conns[0].Target()
	}
	if until := e.ejectedUntil.Load(); until > t {
		st.State = EndpointEjected
		u := time.Unix(0, until).UTC()
		st.EjectedUntil = &u
		if w := e.why.Load(); w != nil {
			st.Why = *w
		}
	} else if !e.up.Load() {
		st.State, st.Why = EndpointDown, "no connection ready"
	}
	if c := e.costAt(t); c > 0 {
		v := c / float64(time.Second)
		st.LatencySeconds = &v
	}
	if ms := e.models.Load(); ms != nil {
		if ms.ready != nil {
			st.Models = slices.Sorted(maps.Keys(ms.ready))
			st.Models = slices.DeleteFunc(st.Models, func(m string) bool { return !ms.ready[m] })
		}
		for m, until := range ms.absent {
			if until > t {
				st.ModelsAbsent = append(st.ModelsAbsent, m)
			}
		}
		slices.Sort(st.ModelsAbsent)
	}
	if ls := e.lat.Load(); ls != nil {
		for m := range *ls {
			var c latCounts
			if !e.modelLatencyAt(m, t, &c) {
				continue
			}
			if st.ModelLatency == nil {
				st.ModelLatency = map[string]ModelLatency{}
			}
			st.ModelLatency[m] = ModelLatency{Answers: c.total,
				P50Seconds: c.quantile(0.5).Seconds(), P99Seconds: c.quantile(0.99).Seconds()}
		}
	}
	return st
}

// Endpoints returns the state of every endpoint of every upstream, by
// upstream in the order configured.
func (r *Router) Endpoints() []EndpointStatus {
	now := r.opts.Now()
	out := []EndpointStatus{}
	for _, up := range r.table.Load().upstreams {
		for _, e := range up.Endpoints() {
			out = append(out, e.status(up.Name(), up.balance, now))
		}
	}
	return out
}

var (
	endpointLabels    = []string{"upstream", "endpoint"}
	endpointCallsDesc = prometheus.NewDesc("infergate_endpoint_calls_total",
		"Calls sent to an endpoint (one replica of an upstream).", endpointLabels, nil)
	endpointFailedDesc = prometheus.NewDesc("infergate_endpoint_failures_total",
		"Calls an endpoint failed: it could not be reached, or answered with a server error.", endpointLabels, nil)
	endpointInFlightDesc = prometheus.NewDesc("infergate_endpoint_in_flight",
		"Calls in progress on an endpoint.", endpointLabels, nil)
	endpointUpDesc = prometheus.NewDesc("infergate_endpoint_up",
		"1 while one of the connections to an endpoint is ready.", endpointLabels, nil)
	endpointEjectedDesc = prometheus.NewDesc("infergate_endpoint_ejected",
		"1 while an endpoint is ejected (out of the picker's choices after failures).", endpointLabels, nil)
	endpointEjectionsDesc = prometheus.NewDesc("infergate_endpoint_ejections_total",
		"Times an endpoint was ejected.", endpointLabels, nil)
	endpointLatencyDesc = prometheus.NewDesc("infergate_endpoint_latency_seconds",
		"The picker's latency cost of an endpoint: the peak EWMA of its calls' latency, decayed since its last answer.", endpointLabels, nil)
	endpointDescs = []*prometheus.Desc{endpointCallsDesc, endpointFailedDesc, endpointInFlightDesc, endpointUpDesc,
		endpointEjectedDesc, endpointEjectionsDesc, endpointLatencyDesc}
)

// collectEndpoints sends the endpoints' metrics.
func (r *Router) collectEndpoints(ch chan<- prometheus.Metric) {
	now := r.opts.Now().UnixNano()
	for _, up := range r.table.Load().upstreams {
		name := up.Name()
		for _, e := range up.Endpoints() {
			addr := e.addr
			if addr == "" {
				continue // handed-in connections: no endpoint to name
			}
			m := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
				ch <- prometheus.MustNewConstMetric(d, t, v, name, addr)
			}
			m(endpointCallsDesc, prometheus.CounterValue, float64(e.calls.Load()))
			m(endpointFailedDesc, prometheus.CounterValue, float64(e.failed.Load()))
			m(endpointInFlightDesc, prometheus.GaugeValue, float64(e.inFlight.Load()))
			m(endpointUpDesc, prometheus.GaugeValue, b2f(e.up.Load()))
			m(endpointEjectedDesc, prometheus.GaugeValue, b2f(e.ejectedUntil.Load() > now))
			m(endpointEjectionsDesc, prometheus.CounterValue, float64(e.ejections.Load()))
			if c := e.costAt(now); c > 0 && !math.IsInf(c, 0) {
				m(endpointLatencyDesc, prometheus.GaugeValue, c/float64(time.Second))
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
