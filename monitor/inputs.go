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
// by rows (InputBucket), since the series was created. Readers take
// differences between two reads; a count lower than the last read means
// the series was dropped and created again.
type InputCounts struct {
	Bytes [InputByteBuckets]uint64
	Rows  [InputRowBuckets]uint64
}

// add counts one call; the shard's lock is held.
func (c *InputCounts) add(bytesIn, rows int64) {
	c.Bytes[InputBucket(bytesIn, InputByteBuckets)]++
	c.Rows[InputBucket(rows, InputRowBuckets)]++
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
// step. It locks each shard briefly and never the hot path's registry
// state.
func (r *Registry) InputCounts(group func(SeriesKey) string, fn func(key SeriesKey, g string, c *InputCounts)) {
	var c InputCounts
	for _, s := range r.state.Load().list {
		g := group(s.key)
		if g == "" {
			continue
		}
		c = InputCounts{}
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			c.Add(&sh.inputs)
			sh.mu.Unlock()
		}
		fn(s.key, g, &c)
	}
}
