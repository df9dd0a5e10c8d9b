package gpu

import (
	"context"
	"errors"
)

// Source reads every GPU it can see once per call. Sample must return soon
// after ctx ends where it can; a Sampler calls it from one goroutine at a
// time and abandons a call that outlives its timeout. Sources that hold a
// resource (NVML) also implement io.Closer.
type Source interface {
	Sample(ctx context.Context) (Reading, error)
}

// SourceFunc adapts a function to a Source (tests, simulations).
type SourceFunc func(ctx context.Context) (Reading, error)

// Sample calls f.
func (f SourceFunc) Sample(ctx context.Context) (Reading, error) { return f(ctx) }

// ErrSourceOff is returned by a source that switched itself off for good
// (NVML after a failed Init); the sampler keeps reporting it as down.
var ErrSourceOff = errors.New("gpu: source is off")
