package anomaly

import (
	"fmt"
	"runtime"
	"testing"
)

// One model-second: score, attribute, learn (recounts included, spread
// over the seconds as they are in use).
func BenchmarkObserve(b *testing.B) {
	det := mustNew(b)
	s := newSim(900)
	warm(det, s, 1000)
	xs := make([][]float64, 4096)
	for i := range xs {
		xs[i] = append([]float64(nil), s.next()...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		det.Observe(xs[i%len(xs)], true)
	}
}

// One second of 1,000 models through a Registry: the cost per second of
// the whole detector, as a share of one core (ms of CPU per second).
func BenchmarkThousandModelsSecond(b *testing.B) {
	const models = 1000
	r, err := NewRegistry(models, DefaultFeatures())
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, models)
	sims := make([]*sim, models)
	for m := range names {
		names[m] = fmt.Sprintf("model-%d", m)
		sims[m] = newSim(uint64(m))
	}
	for range 400 { // past learning
		for m, name := range names {
			r.Observe(name, t0, sims[m].next(), true)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for m, name := range names {
			r.Observe(name, t0, sims[m].next(), true)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/s")
}

// 1,000 detectors, past learning, hold at most 64 KiB each.
func TestMemoryPerModel(t *testing.T) {
	const models = 1000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	dets := make([]*Detector, models)
	s := newSim(1000)
	for m := range dets {
		dets[m] = mustNew(t, WithSeed(uint64(m)))
	}
	for range 200 {
		x := s.next()
		for _, det := range dets {
			det.Observe(x, true)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (after.HeapAlloc - before.HeapAlloc) / models
	t.Logf("%d bytes per model", per)
	if per > 64<<10 {
		t.Errorf("%d bytes per model, want ≤ 64 KiB", per)
	}
	runtime.KeepAlive(dets)
}
