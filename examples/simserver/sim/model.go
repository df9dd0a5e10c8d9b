package sim

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sync/atomic"
)

// model is a loaded model: its config, execution slots, weights and
// statistics.
type model struct {
	cfg ModelConfig
	// slots is a FIFO semaphore of cfg.Slots; nil means unlimited. Go
	// wakes blocked channel senders in arrival order, which gives the
	// queue order of a GPU scheduler.
	slots chan struct{}
	// weights is the classifier's F×C matrix, row-major.
	weights []float32
	stats   modelStats
	// rows counts the rows executed; seed is the model name's hash. Both
	// key the long-tail draws (Server.tail).
	rows atomic.Uint64
	seed uint64
}

func newModel(cfg ModelConfig) *model {
	h := fnv.New64a()
	h.Write([]byte(cfg.Name))
	m := &model{cfg: cfg, seed: h.Sum64()}
	if cfg.Slots > 0 {
		m.slots = make(chan struct{}, cfg.Slots)
	}
	if cfg.Kind == KindClassifier {
		m.weights = classifierWeights(cfg.Name, int(cfg.Inputs[0].Dims[0]), int(cfg.Outputs[0].Dims[0]))
	}
	return m
}

// classifierWeights is a fixed pseudo-random F×C matrix seeded by the model
// name only, so outputs do not depend on the server's seed or protocol.
func classifierWeights(name string, f, c int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x5157))
	scale := 1 / math.Sqrt(float64(f))
	w := make([]float32, f*c)
	for i := range w {
		w[i] = float32((rng.Float64()*2 - 1) * scale)
	}
	return w
}

// compute runs the model's kind on validated inputs (in Inputs order) and
// returns the outputs in Outputs order.
func (m *model) compute(in []tensor) []tensor {
	switch m.cfg.Kind {
	case KindAddSub:
		a, b := in[0].raw, in[1].raw
		sum, diff := make([]byte, len(a)), make([]byte, len(a))
		for i := 0; i+4 <= len(a); i += 4 {
			x, y := binary.LittleEndian.Uint32(a[i:]), binary.LittleEndian.Uint32(b[i:])
			binary.LittleEndian.PutUint32(sum[i:], x+y)
			binary.LittleEndian.PutUint32(diff[i:], x-y)
		}
		return []tensor{{shape: in[0].shape, raw: sum}, {shape: in[0].shape, raw: diff}}
	case KindHalfPlusTwo:
		x := in[0].raw
		y := make([]byte, len(x))
		for i := 0; i+4 <= len(x); i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(x[i:]))
			binary.LittleEndian.PutUint32(y[i:], math.Float32bits(0.5*v+2))
		}
		return []tensor{{shape: in[0].shape, raw: y}}
	case KindClassifier:
		return []tensor{m.classify(in[0])}
	default: // KindIdentity: the request's bytes are not reused by gRPC after decoding, so share them.
		return []tensor{in[0]}
	}
}

// classify computes softmax(x·W) per row.
func (m *model) classify(x tensor) tensor {
	f := int(m.cfg.Inputs[0].Dims[0])
	c := int(m.cfg.Outputs[0].Dims[0])
	n := int(x.shape[0])
	xs := rawToFloat32s(x.raw)
	out := make([]float32, n*c)
	logits := make([]float64, c)
	for r := 0; r < n; r++ {
		row := xs[r*f : (r+1)*f]
		for j := range logits {
			logits[j] = 0
		}
		for i, v := range row {
			w := m.weights[i*c : (i+1)*c]
			for j := range logits {
				logits[j] += float64(v) * float64(w[j])
			}
		}
		maxL := math.Inf(-1)
		for _, l := range logits {
			maxL = math.Max(maxL, l)
		}
		var sum float64
		for j, l := range logits {
			logits[j] = math.Exp(l - maxL)
			sum += logits[j]
		}
		for j, l := range logits {
			out[r*c+j] = float32(l / sum)
		}
	}
	return tensor{shape: []int64{int64(n), int64(c)}, raw: float32sToRaw(out)}
}
