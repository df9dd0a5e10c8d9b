package monitor

import "time"

// Sample holds the components of one finished call, measured by the proxy.
// Negative durations are recorded as 0.
type Sample struct {
	Total    time.Duration // arrival at the proxy to the last byte/status sent to the client
	Upstream time.Duration // time spent in the upstream call
	Queue    time.Duration // time waiting in a batch queue (0 for passthrough)
	Code     string        // gRPC code name as codes.Code.String() gives it: "OK", "Unavailable", ...
	BytesIn  int64         // request payload bytes received from the client
	BytesOut int64         // response payload bytes sent to the client
	// TraceID is the call's trace id when it was traced and sampled; the
	// zero value (untraced) records no exemplar. An array, not a string,
	// so that a traced call costs no allocation to pass it.
	TraceID [16]byte
	// Features is what the call carried (sizes, rows, input shapes): for
	// a recorder that keeps calls, not for the series' figures.
	Features CallFeatures
	// Attempts is the number of upstream attempts the call made (a
	// hedge or a retry makes more than one); 0 when not counted.
	Attempts int
	// BatchID is the batch the call's answer came from; 0 for none.
	BatchID uint64
}

// Code classes a SeriesKey carries; the proxy classifies gRPC codes into them.
const (
	CodeClassOK          = "ok"
	CodeClassClientError = "client_error"
	CodeClassServerError = "server_error"
)

// OverflowLabel is the value of every label of the overflow series.
const OverflowLabel = "other"

// SeriesKey identifies one series.
type SeriesKey struct {
	Model, Version, Method, Upstream string
	CodeClass                        string // "ok", "client_error" or "server_error" (the proxy classifies)
	// Route says which path answered: RoutePrimary, RouteFallback,
	// RouteCascadeEdge or RouteCascadeEscalated (the proxy sets it). Model
	// stays the model the client asked for, so a dashboard shows both.
	Route string
	// SizeClass is the class of the call's request bytes (SizeClassOf),
	// "" for a stream, whose bytes span many requests. It multiplies a
	// model's series by at most len(SizeClasses); MaxSeries bounds them
	// all, and past it calls go to the overflow series as any other key.
	SizeClass string
}

// Route values the proxy sets on SeriesKey.Route.
const (
	RoutePrimary          = "primary"           // the model the client asked for, on its upstream
	RouteFallback         = "fallback"          // the fallback model answered (breaker, alert, operator, retry, hedge, shed)
	RouteCascadeEdge      = "cascade_edge"      // cascade mode: the edge model answered with enough confidence
	RouteCascadeEscalated = "cascade_escalated" // cascade mode: low edge confidence, the primary answered
)

// Degraded reports whether the route is one a latency alert on the model
// should not read: the fallback's latency says nothing about the model's.
func (k SeriesKey) Degraded() bool { return k.Route == RouteFallback }

// OverflowKey is the key of the shared series that takes calls once the
// registry holds MaxSeries series.
var OverflowKey = SeriesKey{
	Model: OverflowLabel, Version: OverflowLabel, Method: OverflowLabel,
	Upstream: OverflowLabel, CodeClass: OverflowLabel, Route: OverflowLabel, SizeClass: OverflowLabel,
}

// less orders keys for stable snapshots and expositions.
func (k SeriesKey) less(o SeriesKey) bool {
	if k.Model != o.Model {
		return k.Model < o.Model
	}
	if k.Version != o.Version {
		return k.Version < o.Version
	}
	if k.Method != o.Method {
		return k.Method < o.Method
	}
	if k.Upstream != o.Upstream {
		return k.Upstream < o.Upstream
	}
	if k.CodeClass != o.CodeClass {
		return k.CodeClass < o.CodeClass
	}
	if k.Route != o.Route {
		return k.Route < o.Route
	}
	return k.SizeClass < o.SizeClass
}
