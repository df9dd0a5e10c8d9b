package pool

import (
	"maps"
	"slices"
	"time"
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

// Status is e's state at now, for the API.
func (e *Endpoint) Status(upstream string, b Balance, now time.Time) EndpointStatus {
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

// Counters are what an endpoint's metrics read of it.
type Counters struct {
	Calls, Failed uint64
	InFlight      int64
	Up, Ejected   bool
	Ejections     int32
	// Cost is the picker's latency cost (nanoseconds; 0 never measured).
	Cost float64
}

// CountersAt reads e's counters at t (unix nanoseconds).
func (e *Endpoint) CountersAt(t int64) Counters {
	return Counters{Calls: e.calls.Load(), Failed: e.failed.Load(), InFlight: e.inFlight.Load(),
		Up: e.up.Load(), Ejected: e.ejectedUntil.Load() > t, Ejections: e.ejections.Load(), Cost: e.costAt(t)}
}
