package release

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// The latency histogram is log-linear, as HDR histograms are, but with
// atomic counts so that recording needs no lock: microseconds below 128
// exactly, above in 64 sub-buckets per power of two (1.6% wide), up to
// 2^31 µs (about 36 minutes; longer calls count there).
const (
	subBits   = 6
	subCount  = 1 << subBits
	linearMax = 2 * subCount
	maxMicros = 1<<31 - 1
	nBuckets  = linearMax + (31-(subBits+1))*subCount
	// HistBytes is the memory of one histogram (one version of one size
	// class): 13 KiB.
	HistBytes = nBuckets * 8
)

// bucketOf returns the bucket of a latency.
func bucketOf(d time.Duration) int {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	if us > maxMicros {
		us = maxMicros
	}
	v := uint64(us)
	if v < linearMax {
		return int(v)
	}
	shift := bits.Len64(v) - (subBits + 1)
	return linearMax + (shift-1)*subCount + int(v>>shift) - subCount
}

// bucketRange returns the lowest latency of bucket i and the lowest of
// the next one.
func bucketRange(i int) (lo, next time.Duration) {
	if i < linearMax {
		return time.Duration(i) * time.Microsecond, time.Duration(i+1) * time.Microsecond
	}
	k := i - linearMax
	shift := k/subCount + 1
	m := int64(k%subCount + subCount)
	return time.Duration(m<<shift) * time.Microsecond, time.Duration((m+1)<<shift) * time.Microsecond
}

// hist counts latencies by bucket; Record is safe from any goroutine.
type hist [nBuckets]atomic.Uint64

func (h *hist) record(i int) { h[i].Add(1) }

// load copies the counts into dst and returns their total.
func (h *hist) load(dst *counts) uint64 {
	var n uint64
	for i := range h {
		c := h[i].Load()
		dst[i] = c
		n += c
	}
	return n
}

// counts is a copy of a hist, read by the judgement.
type counts [nBuckets]uint64

// rank returns the bucket of the k-th smallest latency (1-based) of n.
func (c *counts) rank(k uint64) int {
	var seen uint64
	for i, v := range c {
		seen += v
		if seen >= k && v > 0 {
			return i
		}
	}
	return nBuckets - 1
}

// quantile estimates the q-quantile of n latencies (the middle of its
// bucket); 0 without latencies.
func (c *counts) quantile(q float64, n uint64) time.Duration {
	if n == 0 {
		return 0
	}
	k := uint64(q*float64(n) + 0.999999)
	lo, next := bucketRange(c.rank(max(k, 1)))
	return (lo + next) / 2
}

// quantileBounds returns bounds of the q-quantile of the distribution
// the n latencies come from, holding at once for every n with
// probability 1-alpha (rankBounds); hi is 0 when there is no upper
// bound yet.
func (c *counts) quantileBounds(q float64, n uint64, alpha float64) (lo, hi time.Duration) {
	kmin, kmax := rankBounds(n, q, alpha)
	if kmin >= 1 {
		lo, _ = bucketRange(c.rank(uint64(kmin)))
	}
	if kmax+1 <= int64(n) {
		_, hi = bucketRange(c.rank(uint64(kmax + 1)))
	}
	return lo, hi
}
