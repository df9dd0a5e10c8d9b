package monitor

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// TestRequestHistogramMatchesClientGolang: the request histogram writes
// what a client_golang histogram with the same buckets and schema writes
// for the same calls: classic buckets, native buckets (spans and deltas),
// zero bucket, count and sum, whether the calls were drained into the
// label set (a rotation) or are still in the shards, and whatever the
// values: on a classic bound, on a native one (a power of two), zero,
// spread over decades.
func TestRequestHistogramMatchesClientGolang(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var values []time.Duration
	for range 3000 {
		values = append(values, time.Duration(math.Exp(rng.Float64()*18)*1e3)) // 1 µs to 65 s
	}
	for _, b := range durationBuckets {
		values = append(values, time.Duration(b*1e9))
	}
	values = append(values, 0, time.Second, 2*time.Second, 500*time.Millisecond, time.Duration(1<<20)*time.Microsecond)
	for _, classic := range []bool{true, false} {
		r, clk := newTestRegistry(t, Options{NoClassicBuckets: !classic})
		reg := prometheus.NewPedanticRegistry()
		if err := r.Register(reg); err != nil {
			t.Fatal(err)
		}
		buckets := []float64{}
		if classic {
			buckets = durationBuckets[:]
		}
		ref := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ref", Buckets: buckets,
			NativeHistogramBucketFactor: 1.022, NativeHistogramMaxBucketNumber: 2000,
		})
		for i, v := range values {
			r.Record(testKey, Sample{Total: v, Code: "OK"})
			ref.Observe(v.Seconds())
			if i%1000 == 999 {
				tick(r, clk, 1) // these are drained, the rest wait in the shards
			}
		}
		var want dto.Metric
		if err := ref.Write(&want); err != nil {
			t.Fatal(err)
		}
		got := nativeHistogram(t, reg)
		w := want.GetHistogram()
		if got.GetSampleCount() != w.GetSampleCount() || math.Abs(got.GetSampleSum()-w.GetSampleSum()) > 1e-9*w.GetSampleSum() {
			t.Errorf("classic %v: count %d sum %v, want %d %v", classic, got.GetSampleCount(), got.GetSampleSum(), w.GetSampleCount(), w.GetSampleSum())
		}
		// The sums are compared above; the rest must be equal field by field.
		g, x := proto.Clone(got).(*dto.Histogram), proto.Clone(w).(*dto.Histogram)
		for _, h := range []*dto.Histogram{g, x} {
			h.SampleSum, h.CreatedTimestamp, h.Exemplars = nil, nil, nil
			for _, b := range h.Bucket {
				b.Exemplar = nil
			}
		}
		if !proto.Equal(g, x) {
			t.Errorf("classic %v: histogram differs from client_golang's:\n got %v\nwant %v", classic, g, x)
		}
	}
}

// TestRequestHistogramConcurrent: calls recorded while the windows rotate
// and scrapes read are each counted once: a scrape never sees a call
// twice (drained and still in its shard) nor loses one, and the count
// only grows.
func TestRequestHistogramConcurrent(t *testing.T) {
	var clock atomic.Int64 // read by recording goroutines: not fixedClock
	r := NewRegistry(Options{Shards: 4, IdleTimeout: 1000 * time.Hour, Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	const workers, calls = 4, 2000
	r.Record(testKey, Sample{Total: time.Millisecond, Code: "OK"}) // the series, before the first scrape
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				r.Record(testKey, Sample{Total: time.Duration(1+(i*w)%5000) * time.Microsecond, Code: "OK"})
			}
		})
	}
	done := make(chan struct{})
	var rotations sync.WaitGroup
	rotations.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				clock.Add(int64(time.Second))
				r.Rotate()
			}
		}
	})
	var last uint64
	for range 50 {
		h := nativeHistogram(t, reg)
		n := h.GetSampleCount()
		var inBuckets uint64 = h.GetZeroCount()
		var c int64
		for _, d := range h.GetPositiveDelta() {
			c += d
			inBuckets += uint64(c)
		}
		if n < last || inBuckets != n {
			t.Fatalf("count %d after %d, native buckets hold %d", n, last, inBuckets)
		}
		last = n
	}
	wg.Wait()
	close(done)
	rotations.Wait()
	if n := nativeHistogram(t, reg).GetSampleCount(); n != workers*calls+1 {
		t.Errorf("count %d, want %d", n, workers*calls+1)
	}
}
