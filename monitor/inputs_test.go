package monitor

import (
	"testing"
	"time"
)

func TestInputBucket(t *testing.T) {
	for _, c := range []struct {
		v    int64
		want int
	}{{-1, 0}, {0, 0}, {1, 1}, {2, 2}, {3, 2}, {4, 3}, {7, 3}, {8, 4}, {1 << 40, InputByteBuckets - 1}} {
		if got := InputBucket(c.v, InputByteBuckets); got != c.want {
			t.Errorf("InputBucket(%d) = %d, want %d", c.v, got, c.want)
		}
		if b := InputBucket(c.v, InputByteBuckets); c.v > 0 && b < InputByteBuckets-1 && (InputBucketLow(b) > c.v || 2*InputBucketLow(b) <= c.v) {
			t.Errorf("%d outside its bucket %d (low %d)", c.v, b, InputBucketLow(b))
		}
	}
}

// TestInputCounts: each call counts once by its request bytes and rows,
// summed over the shards, per series, and only for the groups asked, once
// the slice it fell in is rotated.
func TestInputCounts(t *testing.T) {
	r, clk := newTestRegistry(t, Options{Shards: 4})
	other := withModel(testKey, "bert")
	for range 10 {
		r.Record(testKey, Sample{Total: time.Millisecond, Code: "OK", BytesIn: 1000, Features: CallFeatures{BytesIn: 1000, Rows: 4}})
	}
	r.Record(testKey, Sample{Total: time.Millisecond, Code: "OK", BytesIn: 5000, Features: CallFeatures{BytesIn: 5000}})
	r.Record(other, Sample{Total: time.Millisecond, Code: "OK", BytesIn: 1, Features: CallFeatures{BytesIn: 1}})
	tick(r, clk, 1)
	got := map[string]InputCounts{}
	r.InputCounts(func(k SeriesKey) string {
		if k.Model == "bert" {
			return ""
		}
		return k.Model
	}, func(k SeriesKey, g string, c *InputCounts) {
		if k != testKey || g != "resnet" {
			t.Errorf("visited %+v (group %q)", k, g)
		}
		got[g] = *c
	})
	c := got["resnet"]
	if c.Bytes[InputBucket(1000, InputByteBuckets)] != 10 || c.Bytes[InputBucket(5000, InputByteBuckets)] != 1 {
		t.Errorf("bytes counts %v, want 10 in the 1000 bytes bucket and 1 in the 5000's", c.Bytes)
	}
	if c.Rows[InputBucket(4, InputRowBuckets)] != 10 || c.Rows[0] != 1 {
		t.Errorf("rows counts %v, want 10 calls of 4 rows and 1 unknown", c.Rows)
	}
}

// TestInputCountsAllocs: counting the inputs costs the hot path no
// allocation.
func TestInputCountsAllocs(t *testing.T) {
	r, _ := newTestRegistry(t, Options{NoRequestHistogram: true})
	sm := Sample{Total: time.Millisecond, Code: "OK", BytesIn: 600 << 10, Features: CallFeatures{BytesIn: 600 << 10, Rows: 8}}
	r.Record(testKey, sm)
	if n := testing.AllocsPerRun(1000, func() { r.Record(testKey, sm) }); n != 0 {
		t.Errorf("Record allocates %.1f times per call, want 0", n)
	}
}

// TestInputBucketOfHist: the slow-call baseline's histogram buckets fold
// into the input buckets exactly: every value lands where InputBucket
// puts it.
func TestInputBucketOfHist(t *testing.T) {
	for _, n := range []int{InputByteBuckets, InputRowBuckets} {
		var values []int64
		for e := range 35 {
			values = append(values, 1<<e-1, 1<<e, 1<<e+1, 3<<e/2)
		}
		for _, v := range append(values, -1) {
			if got, want := inputBucketOfHist(histBucket(v), n), InputBucket(v, n); got != want {
				t.Fatalf("value %d (of %d buckets): baseline bucket %d folds into %d, want %d", v, n, histBucket(v), got, want)
			}
		}
	}
}
