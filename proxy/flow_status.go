package proxy

import (
	"maps"
	"slices"

	"github.com/infergate/infergate/flow"
)

// FlowStatus is one gate on GET /api/v1/flow: a model of an upstream.
type FlowStatus struct {
	Upstream string `json:"upstream"`
	Model    string `json:"model"`
	// Capacity is how many calls may be in flight now: the sum of its
	// endpoints' limits; InFlight and Waiting are the calls sent and
	// waiting.
	Capacity int `json:"capacity"`
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	// Bands are the calls of each band sent, that waited, refused.
	Bands map[string]FlowBand `json:"bands"`
	// Endpoints are each endpoint's learnt limit for the model.
	Endpoints []FlowEndpoint `json:"endpoints"`
}

// FlowBand is one band's counts at a gate.
type FlowBand struct {
	Sent    uint64 `json:"sent"`
	Waited  uint64 `json:"waited"`
	Refused uint64 `json:"refused"`
}

// FlowEndpoint is one endpoint's limit for a model.
type FlowEndpoint struct {
	Address string `json:"address"`
	Limit   int    `json:"limit"`
	// NoLoadSeconds is its latency for the model without a queue; 0
	// before it is measured.
	NoLoadSeconds float64 `json:"no_load_seconds"`
	InFlight      int32   `json:"in_flight"`
}

// Flow returns every gate's state, by upstream in the order configured
// (the router's upstreams, or the director's one), then by model.
func (p *Proxy) Flow() []FlowStatus {
	out := []FlowStatus{}
	for _, up := range p.flowUpstreams() {
		gates := up.gatesOf()
		for _, model := range slices.Sorted(maps.Keys(gates)) {
			st := gates[model].Stats()
			fs := FlowStatus{Upstream: up.Name(), Model: model, Capacity: st.Capacity, InFlight: st.InFlight,
				Waiting: st.Waiting, Bands: map[string]FlowBand{}}
			for b := range flow.NumBands {
				fs.Bands[flow.Band(b).String()] = FlowBand{Sent: st.Sent[b], Waited: st.Waited[b], Refused: st.Refused[b]}
			}
			for _, e := range up.Endpoints() {
				fe := FlowEndpoint{Address: e.Address(), Limit: flow.MinLimit}
				if cs := e.Conns(); fe.Address == "" && len(cs) > 0 {
					fe.Address = cs[0].Target()
				}
				if n, limit, noLoad, ok := e.FlowOf(model); ok {
					fe.InFlight, fe.Limit, fe.NoLoadSeconds = int32(n), limit, noLoad.Seconds()
				}
				fs.Endpoints = append(fs.Endpoints, fe)
			}
			out = append(out, fs)
		}
	}
	return out
}
