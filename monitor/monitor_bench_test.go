package monitor

import (
	"bytes"

	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// benchSamples is a spread of latencies so the HDR recorders touch many
// buckets, as real traffic does.
var benchSamples = func() []Sample {
	s := make([]Sample, 1024)
	for i := range s {
		total := time.Duration(200+i*37%5000) * time.Microsecond
		s[i] = Sample{Total: total, Upstream: total * 8 / 10, Code: "OK", BytesIn: 512, BytesOut: 2048}
	}
	return s
}()

func BenchmarkSeriesRecordParallel(b *testing.B) {
	traced := make([]Sample, len(benchSamples))
	for i, sm := range benchSamples {
		sm.TraceID = [16]byte{byte(i), byte(i >> 8), 1}
		traced[i] = sm
	}
	for _, bc := range []struct {
		name    string
		opts    Options
		samples []Sample
	}{
		{"hdr_only", Options{NoRequestHistogram: true}, benchSamples},
		{"hdr+prometheus", Options{}, benchSamples},
		{"hdr+prometheus+exemplars", Options{}, traced},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := NewRegistry(bc.opts)
			s := r.Series(testKey)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					s.Record(bc.samples[i&1023])
					i++
				}
			})
		})
	}
}

func BenchmarkSeriesRecord(b *testing.B) {
	r := NewRegistry(Options{NoRequestHistogram: true})
	s := r.Series(testKey)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Record(benchSamples[i&1023])
	}
}

func BenchmarkRegistrySeriesLookup(b *testing.B) {
	r := NewRegistry(Options{NoRequestHistogram: true})
	keys := make([]SeriesKey, 1000)
	for i := range keys {
		keys[i] = testKey
		keys[i].Model = fmt.Sprintf("model-%d", i)
		r.Series(keys[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if r.Series(keys[i%len(keys)]) == nil {
				b.Fatal("nil series")
			}
			i++
		}
	})
}

// busyRegistry returns a registry with n series that each took 50 calls
// in every slice of the last 15 minutes.
func busyRegistry(n int) *Registry { return busyRegistryAt(n, 50, Options{NoRequestHistogram: true}) }

// busyRegistryAt returns a registry with n series that each took perSlice
// calls in every slice of the last 15 minutes.
func busyRegistryAt(n, perSlice int, opts Options) *Registry {
	r := NewRegistry(opts)
	series := make([]*Series, n)
	for i := range series {
		k := testKey
		k.Model = fmt.Sprintf("model-%d", i)
		series[i] = r.Series(k)
	}
	for tick := range 60 * coarseSlots {
		for i, s := range series {
			for j := range perSlice {
				s.Record(benchSamples[(tick*perSlice+j+i*7)&1023])
			}
		}
		r.Rotate()
	}
	return r
}

func BenchmarkRotate(b *testing.B) {
	r := busyRegistry(10)
	list := r.state.Load().list
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i, s := range list {
			for j := range 50 {
				s.Record(benchSamples[(j+i)&1023])
			}
		}
		b.StartTimer()
		r.Rotate()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(list)), "ns/busy-series")
}

func BenchmarkSnapshot(b *testing.B) {
	r := busyRegistry(10)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Snapshot()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10, "ns/busy-series")
}

// heapInUse returns the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkWindowMemory reports the heap a series holds: idle (created, no
// calls) and busy at 1, 50 and 100 calls per second in every slice of 15
// minutes (windows full), with and without the Prometheus request
// histogram, after rotation returned the shard buffers to their pool.
func BenchmarkWindowMemory(b *testing.B) {
	const n = 20
	for b.Loop() {
		before := heapInUse()
		idle := NewRegistry(Options{NoRequestHistogram: true})
		for i := range 1000 {
			k := testKey
			k.Model = fmt.Sprintf("idle-%d", i)
			idle.Series(k)
		}
		b.ReportMetric(float64(heapInUse()-before)/1000, "B/idle-series")
		runtime.KeepAlive(idle)

		for _, rate := range []int{1, 50, 100} {
			before = heapInUse()
			busy := busyRegistryAt(n, rate, Options{NoRequestHistogram: true})
			b.ReportMetric(float64(heapInUse()-before)/n, fmt.Sprintf("B/series@%d/s", rate))
			runtime.KeepAlive(busy)
		}
		before = heapInUse()
		withProm := busyRegistryAt(n, 1, Options{})
		b.ReportMetric(float64(heapInUse()-before)/n, "B/series@1/s+prom")
		runtime.KeepAlive(withProm)
	}
}

// packedBytes adds up the storage of every value set in the windows.
func (r *Registry) packedBytes() int {
	r.winMu.RLock()
	defer r.winMu.RUnlock()
	total := 0
	for _, s := range r.state.Load().list {
		for _, sl := range append(s.win.fine[:len(s.win.fine):len(s.win.fine)], s.win.coarse...) {
			if sl == nil {
				continue
			}
			if sl.vals.h != nil {
				for _, h := range sl.vals.h {
					if h != nil {
						total += h.GetMemorySize()
					}
				}
			}
			total += 8 * cap(sl.vals.raw)
		}
	}
	return total
}

// BenchmarkScrape1000 is one /metrics scrape of 1,000 series that each took
// a call a second for 15 minutes: snapshot, collection and text encoding
// through a real prometheus.Registry.
func BenchmarkScrape1000(b *testing.B) {
	r := busyRegistryAt(1000, 1, Options{})
	reg := prometheus.NewRegistry()
	if err := r.Register(reg); err != nil {
		b.Fatal(err)
	}
	var size int
	b.ReportAllocs()
	for b.Loop() {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "bytes")
}
