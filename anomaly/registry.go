package anomaly

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"
)

// ErrFull is returned by Registry.Observe for a model it has no room
// for. The model is not scored; the caller shows it as learning.
var ErrFull = errors.New("anomaly: registry full")

// Registry keeps one Detector per model, at most a bounded number of
// them. It is safe for concurrent use; one model's seconds must still
// come in order, from one goroutine at a time (the alert engine's
// once-a-second loop), since a Result's Contributions belong to the
// model's detector until its next second.
//
// The caller owns time and eviction: Observe notes when each model was
// last seen, and ForgetQuiet drops the models quiet since a moment (a
// model gone from the route table, or with no calls), Forget one model.
type Registry struct {
	feats []Feature
	o     options
	max   int

	mu     sync.Mutex
	models map[string]*entry
}

type entry struct {
	det  *Detector
	seen time.Time
}

// NewRegistry returns a registry of at most max detectors (max ≥ 1) over
// the given features, each built with opts. A model's detector is seeded
// with the WithSeed seed mixed with a hash of the model's name, so models
// do not recount their trees in the same second.
func NewRegistry(max int, features []Feature, opts ...Option) (*Registry, error) {
	if max < 1 {
		return nil, fmt.Errorf("anomaly: registry of %d models, want at least 1", max)
	}
	feats, err := checkFeatures(features)
	if err != nil {
		return nil, err
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt.apply(&o)
	}
	return &Registry{feats: feats, o: o, max: max, models: make(map[string]*entry)}, nil
}

// Observe gives the model's second to its detector (made on the model's
// first second) and notes now as the model's last. See Detector.Observe
// for x and learn. It returns ErrFull, with a learning Result, for a new
// model when the registry holds max models already.
func (r *Registry) Observe(model string, now time.Time, x []float64, learn bool) (Result, error) {
	r.mu.Lock()
	e := r.models[model]
	if e == nil {
		if len(r.models) >= r.max {
			r.mu.Unlock()
			return Result{Learning: true}, ErrFull
		}
		o := r.o
		h := fnv.New64a()
		h.Write([]byte(model))
		o.seed ^= h.Sum64()
		e = &entry{det: newDetector(r.feats, o)}
		r.models[model] = e
	}
	e.seen = now
	r.mu.Unlock()
	return e.det.Observe(x, learn), nil
}

// Detector returns the model's detector, or nil if it has none. The
// detector is the registry's: read it (Last, Explain, Learning) only from
// the goroutine that feeds the model.
func (r *Registry) Detector(model string) *Detector {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.models[model]; e != nil {
		return e.det
	}
	return nil
}

// Forget drops the model's detector; its next second starts learning
// afresh.
func (r *Registry) Forget(model string) {
	r.mu.Lock()
	delete(r.models, model)
	r.mu.Unlock()
}

// ForgetQuiet drops the detectors of the models last observed before
// cutoff and returns how many it dropped.
func (r *Registry) ForgetQuiet(cutoff time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for m, e := range r.models {
		if e.seen.Before(cutoff) {
			delete(r.models, m)
			n++
		}
	}
	return n
}

// Len returns the number of models the registry holds.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.models)
}
