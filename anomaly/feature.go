package anomaly

import (
	"errors"
	"fmt"
)

// The features infergate feeds, by name. A feature with one of these
// names gets the unit, side and label of DefaultFeatures, and the named
// patterns of the explanation (explain.go) recognise it. Other names are
// allowed; they take part in the score and the generic explanation.
const (
	P50       = "p50"        // median latency, log-ratio to the baseline
	P99       = "p99"        // tail latency, log-ratio
	Errors    = "errors"     // error ratio, difference from the baseline (a fraction: 0.01 is one point)
	Calls     = "calls"      // calls per second, log-ratio
	QueueP99  = "queue_p99"  // p99 of the time calls wait before the model, log-ratio
	Batch     = "batch"      // mean batch size, log-ratio
	InputSize = "input_size" // median input size (rows or bytes per call), log-ratio
	Overhead  = "overhead"   // the proxy's own time per call, log-ratio
	GPUUtil   = "gpu_util"   // GPU utilisation, difference from the baseline (a fraction)
)

// Unit says how a feature's deviation is expressed, for the words of the
// explanation and the floor of its scale. The detector standardises every
// feature by its own learnt spread, so the unit does not change the score.
type Unit int

const (
	// LogRatio is ln(value / baseline): 0 at the baseline, ln 2 for a
	// doubling, −ln 2 for a halving. Shown as "+35%", "−48%" or "×3".
	LogRatio Unit = iota
	// Points is value − baseline for a fraction (error ratio,
	// utilisation): 0.003 is 0.3 points. Shown as "+0.30 pts".
	Points
	// Sigma is a robust z-score, (value − baseline) / spread. Shown as
	// "+4.2σ".
	Sigma
)

func (u Unit) String() string {
	switch u {
	case LogRatio:
		return "log_ratio"
	case Points:
		return "points"
	case Sigma:
		return "sigma"
	}
	return fmt.Sprintf("Unit(%d)", int(u))
}

// Side says which deviations of a feature can be anomalous.
type Side int

const (
	// Both: a rise and a fall are both unusual (batch size).
	Both Side = iota
	// Up: only a rise is unusual; a fall counts as the baseline itself
	// (latency, errors, queue, GPU utilisation, input size: getting
	// better or lighter is never an incident).
	Up
	// Down: only a fall is unusual (calls per second: more calls answered
	// at flat latency is load, not an incident; if the load hurts, the
	// latency, queue and error features show it).
	Down
)

func (s Side) String() string {
	switch s {
	case Both:
		return "both"
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return fmt.Sprintf("Side(%d)", int(s))
}

// Feature describes one entry of the vector a Detector observes.
type Feature struct {
	// Name identifies the feature; it must be unique and non-empty. The
	// names of the constants above carry their meaning into the
	// explanation's patterns.
	Name string
	// Label is the feature in words ("calls/s"). Empty: the name.
	Label string
	// Unit of the deviation (zero: LogRatio).
	Unit Unit
	// Side of the deviation that can be anomalous (zero: Both).
	Side Side
	// MinScale floors the feature's learnt spread, in its unit, so that a
	// feature that barely moves (errors of a healthy model: 0 every
	// second) does not turn its first wobble into a huge deviation. Zero:
	// 0.01 for LogRatio (1%), 0.0005 for Points (0.05 points), 0.1 for
	// Sigma. Negative is an error.
	MinScale float64
}

// DefaultFeatures returns the nine features of issue 47, in this order:
// p50, p99, errors, calls, queue_p99, batch, input_size, overhead,
// gpu_util. The slice is new on every call.
func DefaultFeatures() []Feature {
	return []Feature{
		{Name: P50, Label: "p50", Unit: LogRatio, Side: Up},
		{Name: P99, Label: "p99", Unit: LogRatio, Side: Up},
		{Name: Errors, Label: "errors", Unit: Points, Side: Up},
		{Name: Calls, Label: "calls/s", Unit: LogRatio, Side: Down},
		{Name: QueueP99, Label: "queue", Unit: LogRatio, Side: Up},
		{Name: Batch, Label: "batch size", Unit: LogRatio, Side: Both},
		{Name: InputSize, Label: "median input", Unit: LogRatio, Side: Up},
		{Name: Overhead, Label: "proxy overhead", Unit: LogRatio, Side: Up},
		{Name: GPUUtil, Label: "GPU utilisation", Unit: Points, Side: Up},
	}
}

// MaxFeatures bounds the length of the feature vector.
const MaxFeatures = 32

// ErrFeatures reports an invalid feature list.
var ErrFeatures = errors.New("anomaly: invalid features")

// checkFeatures fills labels and scale floors and validates the list.
func checkFeatures(in []Feature) ([]Feature, error) {
	if len(in) == 0 || len(in) > MaxFeatures {
		return nil, fmt.Errorf("%w: %d features, want 1 to %d", ErrFeatures, len(in), MaxFeatures)
	}
	out := make([]Feature, len(in))
	seen := make(map[string]bool, len(in))
	var errs []error
	for i, f := range in {
		switch {
		case f.Name == "":
			errs = append(errs, fmt.Errorf("%w: feature %d has no name", ErrFeatures, i))
		case seen[f.Name]:
			errs = append(errs, fmt.Errorf("%w: feature %q named twice", ErrFeatures, f.Name))
		case f.Unit < LogRatio || f.Unit > Sigma:
			errs = append(errs, fmt.Errorf("%w: feature %q: unknown unit %d", ErrFeatures, f.Name, int(f.Unit)))
		case f.Side < Both || f.Side > Down:
			errs = append(errs, fmt.Errorf("%w: feature %q: unknown side %d", ErrFeatures, f.Name, int(f.Side)))
		case f.MinScale < 0 || f.MinScale != f.MinScale:
			errs = append(errs, fmt.Errorf("%w: feature %q: negative min scale", ErrFeatures, f.Name))
		}
		seen[f.Name] = true
		if f.Label == "" {
			f.Label = f.Name
		}
		if f.MinScale == 0 {
			f.MinScale = defaultMinScale(f.Unit)
		}
		out[i] = f
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func defaultMinScale(u Unit) float64 {
	switch u {
	case Points:
		return 0.0005
	case Sigma:
		return 0.1
	}
	return 0.01
}
