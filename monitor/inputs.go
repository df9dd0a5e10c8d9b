package monitor

import "math/bits"

// Input size buckets. A call's request bytes and rows are counted in
// powers of two: bucket i holds the values v with bits.Len64(v) == i,
// that is 2^(i-1) <= v < 2^i, and bucket 0 holds 0 (unknown rows). Powers
// of two are as coarse as a reader of "did the inputs grow" needs (a ×4
// growth moves a value two buckets up) and cost one instruction to find.
const (
	// InputByteBuckets covers requests up to 2 GiB; larger ones count in
	// the last bucket (the proxy's largest message is far below).
	InputByteBuckets = 32
	// InputRowBuckets covers up to 2^23 rows; more count in the last.
	InputRowBuckets = 24
)

// InputBucket returns the bucket of v among n buckets (v < 0 counts as
// 0, values past the last bucket in the last).
func InputBucket(v int64, n int) int {
	if v <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(v)), n-1)
}

// InputBucketLow returns the smallest value bucket i holds.
func InputBucketLow(i int) int64 {
	if i <= 0 {
		return 0
	}
	return 1 << (i - 1)
}

// InputCounts are running counts of a series' calls by request bytes and
// by rows (InputBucket), since the series was created, as of the last
// rotation. Readers take differences between two reads; a count lower
// than the last read means the series was dropped and created again.
type InputCounts struct {
	Bytes [InputByteBuckets]uint64
	Rows  [InputRowBuckets]uint64
}

// addBase adds the calls a shard's slow-call baseline counted: its
// histograms have two buckets per power of two (histBucket), these one
// (InputBucket), so each of its buckets falls in exactly one of these.
func (c *InputCounts) addBase(b *shardBase) {
	for i, n := range b.bytes {
		c.Bytes[inputBucketOfHist(i, InputByteBuckets)] += uint64(n)
	}
	for i, n := range b.rows {
		c.Rows[inputBucketOfHist(i, InputRowBuckets)] += uint64(n)
	}
}

// inputBucketOfHist is the InputBucket (of n) of the values in histBucket
// i: 0 and 1 are themselves; from 2 on, histBucket i holds values of
// bit length i/2+1.
func inputBucketOfHist(i, n int) int {
	if i < 2 {
		return i
	}
	return min(i/2+1, n-1)
}

// Add adds o's counts into c.
func (c *InputCounts) Add(o *InputCounts) {
	for i := range c.Bytes {
		c.Bytes[i] += o.Bytes[i]
	}
	for i := range c.Rows {
		c.Rows[i] += o.Rows[i]
	}
}

// InputCounts calls fn with the running input counts of every series
// whose group(key) is not "" (the overflow series is left out): what a
// reader of the inputs' distribution (the correlator) differences step by
// step. The counts are as of the last rotation (the shards count them in
// their slow-call baseline, moved out when they drain); fn runs with the
// windows' read lock held, so it must not call back into the registry.
// The hot path is never locked.
func (r *Registry) InputCounts(group func(SeriesKey) string, fn func(key SeriesKey, g string, c *InputCounts)) {
	r.winMu.RLock()
	defer r.winMu.RUnlock()
	for _, s := range r.state.Load().list {
		g := group(s.key)
		if g == "" {
			continue
		}
		c := s.inputs
		fn(s.key, g, &c)
	}
}
