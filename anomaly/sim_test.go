package anomaly

import (
	"math"
	"math/rand/v2"
)

// sim makes synthetic seconds of the nine default features, already as
// deviations from the baseline: Gaussian noise with an AR(1) memory
// (φ = 0.3) and, one second in a hundred, a burst three times as wide,
// so the benign runs have tails. A shift adds to the deviations from its
// onset.
type sim struct {
	rng  *rand.Rand
	prev []float64
	x    []float64
}

// noiseSD per default feature: p50, p99, errors (fraction), calls,
// queue, batch, input size, overhead, GPU utilisation (fraction).
var noiseSD = []float64{0.04, 0.08, 0.0005, 0.06, 0.15, 0.05, 0.05, 0.1, 0.03}

func newSim(seed uint64) *sim {
	return &sim{
		rng:  rand.New(rand.NewPCG(seed, 7)),
		prev: make([]float64, len(noiseSD)),
		x:    make([]float64, len(noiseSD)),
	}
}

// next returns the noise of the next second (the slice is reused).
func (s *sim) next() []float64 {
	burst := 1.0
	if s.rng.IntN(100) == 0 {
		burst = 3
	}
	for i, sd := range noiseSD {
		e := 0.3*s.prev[i] + math.Sqrt(1-0.09)*sd*burst*s.rng.NormFloat64()
		s.prev[i] = e
		s.x[i] = e
	}
	// The error ratio cannot go below the baseline's zero by much: a
	// healthy model mostly has none.
	s.x[2] = max(s.x[2], -0.0002)
	return s.x
}

// shift is an incident: deviations added to the noise from its onset.
type shift struct {
	name  string
	add   map[string]float64
	first []string // a feature any of which must be named first
	// pattern the explanation must name
	pattern string
}

var shifts = []shift{
	{"latency x1.47", map[string]float64{P50: math.Log(1.47), P99: math.Log(1.47)}, []string{P50, P99}, "latency_rise"},
	{"errors 1%", map[string]float64{Errors: 0.01}, []string{Errors}, "errors"},
	{"throughput collapse", map[string]float64{Calls: math.Log(0.5)}, []string{Calls}, "throughput_collapse"},
	{"queue growth, flat p99", map[string]float64{QueueP99: math.Log(3)}, []string{QueueP99}, "queue_growth"},
	{"mild compound", map[string]float64{Errors: 0.003, P50: math.Log(1.15)}, []string{Errors, P50}, "errors_and_latency"},
	{"input shift x8", map[string]float64{InputSize: math.Log(8)}, []string{InputSize}, "inputs_grew"},
	{"GPU saturation", map[string]float64{GPUUtil: 0.4, P99: math.Log(1.2)}, []string{GPUUtil}, "gpu_saturation"},
}

func featureIndex(name string) int {
	for i, f := range DefaultFeatures() {
		if f.Name == name {
			return i
		}
	}
	panic(name)
}
