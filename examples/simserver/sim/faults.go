package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/codes"
)

// AllModels is the Fault.Model value that applies a fault to every model
// ("" is accepted as a synonym and normalised to it).
const AllModels = "*"

// Fault is an injected misbehaviour of one model (or all models). It is the
// JSON body of POST /api/v1/faults. A model's own fault takes precedence
// over an AllModels fault; the two are not combined.
type Fault struct {
	// Model is the model name, or "*" (or "") for all models.
	Model string `json:"model"`
	// Version narrows the fault to one version the model serves (a slow
	// canary); "" is every version. A model has one fault at a time.
	Version string `json:"version,omitempty"`
	// Slowdown multiplies the compute latency (the time a request holds
	// an execution slot); 0 means 1, negative is an error.
	Slowdown float64 `json:"slowdown"`
	// ErrorRate is the fraction of requests, 0..1, that fail with
	// ErrorCode before they are queued.
	ErrorRate float64 `json:"error_rate"`
	// ErrorCode is a gRPC code name, case-insensitive (e.g. "unavailable");
	// empty means INTERNAL. It is normalised to upper case.
	ErrorCode string `json:"error_code"`
	// Hang blocks every request until its client's context ends (or the
	// server closes).
	Hang bool `json:"hang"`
	// DropConnections closes the TCP connection each request to the
	// model arrived on (only connections accepted through a listener from
	// WrapListener can be closed); the request fails UNAVAILABLE and
	// every other call on that connection fails too.
	DropConnections bool `json:"drop_connections"`
	// DelayMS adds a fixed delay after execution, before the response,
	// like a slow network: it does not hold an execution slot. For a
	// token_stream model it delays the first response only: a slow first
	// response (time to first token).
	DelayMS float64 `json:"delay_ms"`
	// StallMS pauses a token_stream model before a later response: a
	// stall between tokens. StallRate is the fraction, 0..1, of those gaps
	// that stall, drawn from the seeded source; 0 means every gap.
	StallMS   float64 `json:"stall_ms"`
	StallRate float64 `json:"stall_rate"`
	// Throttle throttles the simulated GPU: "thermal" (SM clock halved,
	// thermal slowdown reasons, temperature towards 90 °C) or "power" (SM
	// clock at 60%, sw_power_cap, power at the limit); "" is none. The GPU
	// is one device, so the throttle slows every model's compute by the
	// clock ratio, whichever model the fault names; it lasts while any
	// fault carries it (thermal wins over power).
	Throttle string `json:"throttle,omitempty"`
	// FlipRate is the fraction, 0..1, of answered calls whose answer is
	// wrong: in each row of every output whose last dimension holds two
	// or more elements (a classifier's classes), the top element swaps
	// places with the runner-up (the largest value below it), so the
	// row's argmax changes and its values stay a permutation. Which calls
	// flip is a low-discrepancy sequence seeded by the server's seed and
	// the fault's model and version: exactly the fraction, to within a
	// few calls, over any run of calls. Not applied to token_stream models.
	FlipRate float64 `json:"flip_rate,omitempty"`
	// Perturb is relative noise added to every element of every output:
	// x becomes x·(1+Perturb·u), u uniform in [-1,1] drawn per element
	// (INT32 outputs rounded to the nearest and saturated), so zeros stay
	// zero and no element moves by more than Perturb·|x|. Applied after a
	// flip; not applied to token_stream models.
	Perturb float64 `json:"perturb,omitempty"`
}

// FieldError is a fault or request field that failed validation.
type FieldError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return fmt.Sprintf("sim: fault: %s: %s", e.Field, e.Reason) }

// parseCode parses an upper-case gRPC code name as grpc-go's JSON form
// spells it (e.g. DEADLINE_EXCEEDED, CANCELLED; CANCELED is accepted too).
// Numbers and OK are refused: a fault must name a failure.
func parseCode(name string) (codes.Code, bool) {
	if name == "CANCELED" {
		name = "CANCELLED"
	}
	if name == "" || name == "OK" || strings.ContainsAny(name, `"0123456789`) {
		return 0, false
	}
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(`"` + name + `"`)); err != nil {
		return 0, false
	}
	return c, true
}

// normalize fills defaults and validates f against the served models; it
// returns the gRPC code the fault fails requests with.
func (f *Fault) normalize(known func(string) *ModelConfig) (codes.Code, error) {
	if f.Model == "" {
		f.Model = AllModels
	}
	if f.Model != AllModels && known(f.Model) == nil {
		return 0, &FieldError{"model", fmt.Sprintf("unknown model %q", f.Model)}
	}
	if f.Version != "" {
		if f.Model == AllModels {
			return 0, &FieldError{"version", "needs a model"}
		}
		if _, ok := known(f.Model).resolve(f.Version); !ok {
			return 0, &FieldError{"version", fmt.Sprintf("model %q does not serve version %q (it serves %v)", f.Model, f.Version, known(f.Model).versions())}
		}
	}
	if f.Slowdown == 0 {
		f.Slowdown = 1
	}
	if f.Slowdown < 0 {
		return 0, &FieldError{"slowdown", fmt.Sprintf("must be > 0, got %v", f.Slowdown)}
	}
	if f.ErrorRate < 0 || f.ErrorRate > 1 {
		return 0, &FieldError{"error_rate", fmt.Sprintf("must be in [0,1], got %v", f.ErrorRate)}
	}
	if f.DelayMS < 0 {
		return 0, &FieldError{"delay_ms", fmt.Sprintf("must be >= 0, got %v", f.DelayMS)}
	}
	if f.StallMS < 0 {
		return 0, &FieldError{"stall_ms", fmt.Sprintf("must be >= 0, got %v", f.StallMS)}
	}
	if f.StallRate < 0 || f.StallRate > 1 {
		return 0, &FieldError{"stall_rate", fmt.Sprintf("must be in [0,1], got %v", f.StallRate)}
	}
	if !(f.FlipRate >= 0 && f.FlipRate <= 1) {
		return 0, &FieldError{"flip_rate", fmt.Sprintf("must be in [0,1], got %v", f.FlipRate)}
	}
	if !(f.Perturb >= 0) || math.IsInf(f.Perturb, 1) {
		return 0, &FieldError{"perturb", fmt.Sprintf("must be a finite number >= 0, got %v", f.Perturb)}
	}
	if f.StallMS > 0 && f.StallRate == 0 {
		f.StallRate = 1
	}
	f.Throttle = strings.ToLower(f.Throttle)
	if _, ok := throttleClock[f.Throttle]; !ok {
		return 0, &FieldError{"throttle", fmt.Sprintf("must be %q, %q or empty, got %q", ThrottleThermal, ThrottlePower, f.Throttle)}
	}
	if f.ErrorCode == "" {
		f.ErrorCode = "INTERNAL"
	}
	f.ErrorCode = strings.ToUpper(f.ErrorCode)
	code, ok := parseCode(f.ErrorCode)
	if !ok {
		return 0, &FieldError{"error_code", fmt.Sprintf("unknown or non-error gRPC code %q", f.ErrorCode)}
	}
	return code, nil
}

// activeFault is a validated fault with its parsed code.
type activeFault struct {
	Fault
	code codes.Code
	// seed keys the fault's flip and perturb draws (server seed, model,
	// version); calls counts the answers it has altered so far.
	seed  uint64
	calls atomic.Uint64
}

// faultSet is an immutable map model → fault, swapped whole on change so
// the request path reads it without a lock.
type faultSet map[string]*activeFault

// lookup returns the fault for a call to version of model: the model's
// own (unless it is for another version), else the all-models one.
func (fs faultSet) lookup(model, version string) *activeFault {
	if len(fs) == 0 {
		return nil
	}
	if f, ok := fs[model]; ok && (f.Version == "" || f.Version == version) {
		return f
	}
	return fs[AllModels]
}

// throttle returns the GPU throttle the faults ask for: thermal if any
// fault asks for it, else power if any does, else "".
func (fs faultSet) throttle() string {
	kind := ""
	for _, f := range fs {
		switch f.Throttle {
		case ThrottleThermal:
			return ThrottleThermal
		case ThrottlePower:
			kind = ThrottlePower
		}
	}
	return kind
}

// list returns the faults sorted by model.
func (fs faultSet) list() []Fault {
	out := make([]Fault, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.Fault)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}
