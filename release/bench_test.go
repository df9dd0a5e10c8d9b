package release

import (
	"testing"
	"time"
)

// The pick and the record of a call, as the proxy makes them on every
// call of a model with a release: no allocation, no lock.
func BenchmarkChoose(b *testing.B) {
	spec := canary(10)
	spec.Shadow = &Shadow{Fraction: 0.1}
	s := mustSet(b, spec)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = s.Choose("resnet50", nil, false)
		}
	})
}

func BenchmarkChooseSticky(b *testing.B) {
	spec := canary(10)
	spec.Sticky = "x-user"
	s := mustSet(b, spec)
	key := []byte("user-1234567")
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Choose("resnet50", key, false)
	}
}

func BenchmarkObserve(b *testing.B) {
	s := mustSet(b, canary(10))
	r := s.Choose("resnet50", nil, false).Release
	for i := range 1000 {
		r.Observe(Stable, 1, time.Duration(i)*time.Millisecond, true)
	}
	s.Judge(epoch) // bins cut: the full path
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			r.Observe(Version(i&1), 1, time.Duration(i&1023)*time.Millisecond, i%100 != 0)
		}
	})
}

func TestChooseAndObserveAllocateNothing(t *testing.T) {
	s := mustSet(t, canary(10))
	r := s.Choose("resnet50", nil, false).Release
	r.Observe(Stable, 0, time.Millisecond, true) // the class's counters
	if n := testing.AllocsPerRun(1000, func() {
		c := s.Choose("resnet50", []byte("k"), false)
		c.Release.Observe(c.Version, 0, 3*time.Millisecond, true)
		c.Release.ObserveShadow(true)
	}); n != 0 {
		t.Errorf("Choose and Observe allocate %v times a call, want 0", n)
	}
}
