package flowstats

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/flow"
	"github.com/infergate/infergate/proxy/pool"
)

// GateStatus is one gate on GET /api/v1/flow: a model of an upstream.
type GateStatus struct {
	Upstream string `json:"upstream"`
	Model    string `json:"model"`
	// Capacity is how many calls may be in flight now: the sum of its
	// endpoints' limits; InFlight and Waiting are the calls sent and
	// waiting.
	Capacity int `json:"capacity"`
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	// Bands are the calls of each band sent, that waited, refused.
	Bands map[string]GateBand `json:"bands"`
	// Endpoints are each endpoint's learnt limit for the model.
	Endpoints []GateEndpoint `json:"endpoints"`
}

// GateBand is one band's counts at a gate.
type GateBand struct {
	Sent    uint64 `json:"sent"`
	Waited  uint64 `json:"waited"`
	Refused uint64 `json:"refused"`
}

// GateEndpoint is one endpoint's limit for a model.
type GateEndpoint struct {
	Address string `json:"address"`
	Limit   int    `json:"limit"`
	// NoLoadSeconds is its latency for the model without a queue; 0
	// before it is measured.
	NoLoadSeconds float64 `json:"no_load_seconds"`
	InFlight      int32   `json:"in_flight"`
}

// StatusOf is the status of g, the gate of model at upstream, whose
// endpoints are endpoints.
func StatusOf(upstream, model string, g *flow.Gate, endpoints []*pool.Endpoint) GateStatus {
	st := g.Stats()
	fs := GateStatus{Upstream: upstream, Model: model, Capacity: st.Capacity, InFlight: st.InFlight,
		Waiting: st.Waiting, Bands: map[string]GateBand{}}
	for b := range flow.NumBands {
		fs.Bands[flow.Band(b).String()] = GateBand{Sent: st.Sent[b], Waited: st.Waited[b], Refused: st.Refused[b]}
	}
	for _, e := range endpoints {
		fe := GateEndpoint{Address: e.Address(), Limit: flow.MinLimit}
		if cs := e.Conns(); fe.Address == "" && len(cs) > 0 {
			fe.Address = cs[0].Target()
		}
		if n, limit, noLoad, ok := e.FlowOf(model); ok {
			fe.InFlight, fe.Limit, fe.NoLoadSeconds = int32(n), limit, noLoad.Seconds()
		}
		fs.Endpoints = append(fs.Endpoints, fe)
	}
	return fs
}

var (
	flowLabels    = []string{"tenant", "band"}
	flowCallsDesc = prometheus.NewDesc("infergate_flow_calls_total",
		"Calls flow control let go at once, after waiting, or refused, by tenant (its own series for the busiest, then other) and band.",
		append(flowLabels, "outcome"), nil)
	flowWaitDesc = prometheus.NewDesc("infergate_flow_wait_seconds_total",
		"Seconds calls waited for their turn at flow control, by tenant and band.", flowLabels, nil)
	flowP50Desc = prometheus.NewDesc("infergate_flow_tenant_p50_seconds",
		"A tenant's calls' median latency (waits included) over the last 10 to 20 s.", []string{"tenant"}, nil)
	flowP99Desc = prometheus.NewDesc("infergate_flow_tenant_p99_seconds",
		"A tenant's calls' p99 latency (waits included) over the last 10 to 20 s: what a per-tenant SLO reads.", []string{"tenant"}, nil)
	flowGateDesc = prometheus.NewDesc("infergate_flow_gate",
		"A flow-control gate's capacity (its endpoints' learnt limits), calls in flight and calls waiting.",
		[]string{"upstream", "model", "state"}, nil)
)

// Gates calls yield with every gate there is now: its upstream, its
// model and the gate.
type Gates func(yield func(upstream, model string, g *flow.Gate))

// collector exports flow control's metrics.
type collector struct {
	tenants *Tenants
	gates   Gates
}

// NewCollector returns flow control's metrics: the tenants' and those
// of the gates that gates yields; to register once.
func NewCollector(tenants *Tenants, gates Gates) prometheus.Collector {
	return collector{tenants, gates}
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- flowCallsDesc
	ch <- flowWaitDesc
	ch <- flowP50Desc
	ch <- flowP99Desc
	ch <- flowGateDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	t := time.Now().UnixNano()
	for _, s := range c.tenants.all() {
		for b := range flow.NumBands {
			band := flow.Band(b).String()
			for o, name := range outcomeNames {
				if v := s.calls[b][o].Load(); v > 0 {
					ch <- prometheus.MustNewConstMetric(flowCallsDesc, prometheus.CounterValue, float64(v), s.name, band, name)
				}
			}
			if w := s.waited[b].Load(); w > 0 {
				ch <- prometheus.MustNewConstMetric(flowWaitDesc, prometheus.CounterValue, time.Duration(w).Seconds(), s.name, band)
			}
		}
		if n, p50, p99 := s.lat.At(t); n > 0 {
			ch <- prometheus.MustNewConstMetric(flowP50Desc, prometheus.GaugeValue, p50.Seconds(), s.name)
			ch <- prometheus.MustNewConstMetric(flowP99Desc, prometheus.GaugeValue, p99.Seconds(), s.name)
		}
	}
	c.gates(func(upstream, model string, g *flow.Gate) {
		st := g.Stats()
		ch <- prometheus.MustNewConstMetric(flowGateDesc, prometheus.GaugeValue, float64(st.Capacity), upstream, model, "capacity")
		ch <- prometheus.MustNewConstMetric(flowGateDesc, prometheus.GaugeValue, float64(st.InFlight), upstream, model, "in_flight")
		ch <- prometheus.MustNewConstMetric(flowGateDesc, prometheus.GaugeValue, float64(st.Waiting), upstream, model, "waiting")
	})
}
