package route

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/proxy/pool"
)

// Endpoints returns the state of every endpoint of every upstream, by
// upstream in the order configured.
func (r *Router) Endpoints() []pool.EndpointStatus {
	now := r.opts.Now()
	out := []pool.EndpointStatus{}
	for _, up := range r.table.Load().upstreams {
		for _, e := range up.Endpoints() {
			out = append(out, e.Status(up.Name(), up.Balance(), now))
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
			addr := e.Address()
			if addr == "" {
				continue // handed-in connections: no endpoint to name
			}
			m := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
				ch <- prometheus.MustNewConstMetric(d, t, v, name, addr)
			}
			k := e.CountersAt(now)
			m(endpointCallsDesc, prometheus.CounterValue, float64(k.Calls))
			m(endpointFailedDesc, prometheus.CounterValue, float64(k.Failed))
			m(endpointInFlightDesc, prometheus.GaugeValue, float64(k.InFlight))
			m(endpointUpDesc, prometheus.GaugeValue, b2f(k.Up))
			m(endpointEjectedDesc, prometheus.GaugeValue, b2f(k.Ejected))
			m(endpointEjectionsDesc, prometheus.CounterValue, float64(k.Ejections))
			if c := k.Cost; c > 0 && !math.IsInf(c, 0) {
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
			return up.Replicas(model, t)
		}
	}
	return 1
}
