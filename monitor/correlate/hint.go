package correlate

import "math"

// The cause hints, the values of the hint label and of ModelState.Hint.
const (
	HintNone              = "none"
	HintGPUSaturated      = "gpu_saturated"
	HintGPUThrottled      = "gpu_throttled"
	HintGPUMemoryPressure = "gpu_memory_pressure"
	HintNotGPU            = "not_gpu"
	HintUnknown           = "unknown"
	// HintInputsGrew: the model's recent requests are, with confidence,
	// at least twice as large (request bytes or rows p90) as usual.
	HintInputsGrew = "inputs_grew"
	// HintInputShapeChanged: the requests carry their usual bytes in
	// other shapes (rows p90 halved or less: bigger rows).
	HintInputShapeChanged = "input_shape_changed"
	// HintOneEndpointSlow: the model's upstream is a pool of replicas,
	// and one of them answers it much slower than the rest
	// (ModelState.SlowEndpoint names it).
	HintOneEndpointSlow = "one_endpoint_slow"
)

// Hints lists every hint; infergate_model_cause_hint has one series per
// model, whose hint label is one of them.
var Hints = []string{HintNone, HintGPUSaturated, HintGPUThrottled, HintGPUMemoryPressure, HintNotGPU, HintUnknown,
	HintInputsGrew, HintInputShapeChanged, HintOneEndpointSlow}

// Thresholds of the cause-hint rules.
const (
	// SaturatedUtilization is the utilisation at and above which the GPU
	// has no headroom.
	SaturatedUtilization = 0.9
	// IdleUtilization is the utilisation under which the GPU is not the
	// bottleneck.
	IdleUtilization = 0.5
	// MovesWith is the correlation at and above which latency moves with
	// utilisation.
	MovesWith = 0.5
	// MemoryPressure is the used/total memory ratio at and above which
	// the GPU is short of memory.
	MemoryPressure = 0.95
	// FlatUtilization is the standard deviation of utilisation over the 1m
	// ring under which it is flat (too flat to correlate).
	FlatUtilization = 0.05
)

// Signal is what Hint decides from: one model at one instant.
type Signal struct {
	// LatencyUp is true when the model's p99 is up against its baseline.
	LatencyUp bool
	// HasGPU is true when the model's GPU has a current reading.
	HasGPU bool
	// Utilization is the GPU's utilisation, 0..1.
	Utilization float64
	// UtilizationFlat is true when utilisation barely moved over the ring.
	UtilizationFlat bool
	// Correlation is between the model's p99 and the GPU's utilisation
	// over the 1m ring; NaN when it cannot be computed.
	Correlation float64
	// Throttled is true under a thermal/power/hardware slowdown with the
	// SM clock below its maximum.
	Throttled bool
	// MemoryRatio is used/total memory; HasMemory says it is known.
	MemoryRatio float64
	HasMemory   bool
	// Inputs is HintInputsGrew or HintInputShapeChanged when the recent
	// calls' inputs moved against the model's usual ones with confidence
	// (InputState.Moved), "" when they did not or cannot tell.
	Inputs string
	// SlowEndpoint is true when one replica of the model's pool answers
	// it much slower than the others (Options.SlowEndpoint).
	SlowEndpoint bool
}

// Hint returns the cause hint for s; the package documentation lists the
// rules in order.
func Hint(s Signal) string {
	moves := !math.IsNaN(s.Correlation) && s.Correlation >= MovesWith
	switch {
	case !s.LatencyUp:
		return HintNone
	case s.SlowEndpoint:
		// The pool's other replicas answer in time: what slows the model
		// is one machine, whatever its GPU reads.
		return HintOneEndpointSlow
	case s.HasGPU && s.Throttled:
		// A slowdown of the hardware: no input explains it.
		return HintGPUThrottled
	case s.Inputs != "":
		// Bigger inputs explain a busy GPU as well as the latency: the
		// inputs are the cause to look at, GPU busy or not.
		return s.Inputs
	case !s.HasGPU:
		return HintUnknown
	case s.Throttled:
		return HintGPUThrottled
	case s.HasMemory && s.MemoryRatio >= MemoryPressure:
		return HintGPUMemoryPressure
	case s.Utilization >= SaturatedUtilization && (moves || s.UtilizationFlat || math.IsNaN(s.Correlation)):
		return HintGPUSaturated
	case s.Utilization < IdleUtilization && (s.UtilizationFlat || !moves):
		return HintNotGPU
	}
	return HintUnknown
}
