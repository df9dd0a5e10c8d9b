package monitor

import (
	"math/bits"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// HDR geometry: values are microseconds from 1 µs to one hour at three
// significant figures (0.1% relative error). A dense histogram of this shape
// holds 23,552 counts (about 184 KiB), so dense histograms are used only
// where they pay: by a shard that records more than bufCap calls in one
// slice, and by the snapshot merger. Everything stored is raw or packed.
const (
	hdrLowest  = 1
	hdrHighest = int64(time.Hour / time.Microsecond)
	hdrSigFigs = 3
)

// toMicros converts a duration to the histogram's unit, rounding to the
// nearest microsecond and clamping to the trackable range rather than
// dropping the value (RecordValue errors out of range). One hour in
// microseconds fits a uint32, which the raw value sets rely on.
func toMicros(d time.Duration) int64 {
	us := (int64(d) + 500) / 1000
	return min(max(us, 0), hdrHighest)
}

// fromMicros converts a histogram value back to a duration.
func fromMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// densePool recycles dense recorders: a shard takes one per component only
// when its call buffer overflows within a slice; drain resets it and puts
// it back.
var densePool = sync.Pool{New: func() any { return newDense() }}

func newDense() *hdr.Histogram { return hdr.New(hdrLowest, hdrHighest, hdrSigFigs) }

func newPacked() *hdr.PackedHistogram { return hdr.NewPacked(hdrLowest, hdrHighest, hdrSigFigs) }

// bufCap is how many calls a shard buffers raw in one slice before it
// moves them into dense histograms: a series that sees a few calls a
// second never holds a dense histogram.
const bufCap = 32

// callBuf holds the raw components (microseconds) of up to bufCap calls.
type callBuf struct {
	n int
	v [bufCap][NumComponents]uint32
}

var bufPool = sync.Pool{New: func() any { return new(callBuf) }}

// rawMax is the most values a valueSet keeps raw; beyond it they go into a
// packed histogram. 256 raw values take 512 bytes, less than a packed
// histogram of that many latencies, and far less for a few values.
const rawMax = 256

// valueSet is the recorded values of one stream quantity over one stored
// step (a series' components are kept together, in callValues):
// while there are few, the index of each value's HDR bucket (2 bytes: the
// histogram cannot tell values of one bucket apart, so nothing is lost);
// a packed HDR histogram beyond. Both answer quantiles exactly as an HDR
// histogram of the same values.
type valueSet struct {
	raw []uint16 // bucket indexes (bucketOf)
	h   *hdr.PackedHistogram
}

// The HDR geometry of hdrLowest 1 and hdrSigFigs 3: buckets of 2,048
// sub-buckets, each bucket after the first adding its upper 1,024. One
// hour in microseconds falls in bucket index 23,551: a uint16 holds them all.
const (
	subBucketBits = 11 // log2 of the sub-bucket count, 2,048 >= 2 * 10^3
	subBucketMask = 1<<subBucketBits - 1
	subBucketHalf = 1 << (subBucketBits - 1)
)

// bucketOf returns the index of the HDR bucket that holds us (in range).
func bucketOf(us int64) uint16 {
	b := int64(bits.Len64(uint64(us|subBucketMask))) - subBucketBits
	return uint16(b*subBucketHalf + us>>b)
}

// bucketValue returns the lowest value of bucket index i: recording it
// puts a count in bucket i.
func bucketValue(i uint16) int64 {
	if i < 1<<subBucketBits {
		return int64(i)
	}
	b := int64(i)/subBucketHalf - 1
	return (int64(i)%subBucketHalf + subBucketHalf) << b
}

// highestEquivalent returns the largest value an HDR histogram of this
// geometry cannot tell from v: the top of v's bucket.
func highestEquivalent(v int64) int64 {
	bucket := int64(bits.Len64(uint64(v|subBucketMask))) - subBucketBits
	sub := v >> bucket
	size := int64(1) << bucket
	if sub >= 1<<subBucketBits {
		size <<= 1
	}
	return sub<<bucket + size - 1
}

// add records one value.
func (v *valueSet) add(us uint32, f *packedFree) {
	if v.h == nil && len(v.raw) < rawMax {
		v.raw = append(v.raw, bucketOf(int64(us)))
		return
	}
	v.pack(f)
	// Values come from toMicros, inside the range: no error.
	_ = v.h.RecordValue(int64(us))
}

// pack moves the raw values into a packed histogram.
func (v *valueSet) pack(f *packedFree) {
	if v.h == nil {
		v.h = f.get()
	}
	for _, i := range v.raw {
		_ = v.h.RecordValue(bucketValue(i))
	}
	v.raw = nil
}

// addDense adds a dense recorder's counts.
func (v *valueSet) addDense(d *hdr.Histogram, f *packedFree) {
	v.pack(f)
	v.h.MergeFrom(d)
}

// merge adds src's values.
func (v *valueSet) merge(src *valueSet, f *packedFree) {
	if src.h != nil {
		v.pack(f)
		v.h.Merge(src.h)
	}
	if v.h == nil && len(v.raw)+len(src.raw) <= rawMax {
		v.raw = append(v.raw, src.raw...)
		return
	}
	v.pack(f)
	for _, i := range src.raw {
		_ = v.h.RecordValue(bucketValue(i))
	}
}

// release gives the storage back.
func (v *valueSet) release(f *packedFree) {
	f.put(v.h)
	v.h, v.raw = nil, nil
}

// rawCall is one call's components as the indexes of their HDR buckets
// (bucketOf); noValue for a queue time the call did not have.
type rawCall [NumComponents]uint16

// noValue marks a component a call did not have: above every bucket
// index (one hour is 23,551).
const noValue = ^uint16(0)

// callValues is the recorded values of every component over one stored
// step of a series: while there are few, call by call (8 bytes each: the
// index of each component's HDR bucket, so nothing is lost); a packed
// HDR histogram per component beyond rawMax calls. It answers as
// valueSets per component would, in 32 bytes of the slice rather than
// 128: a busy series keeps a slice per second of its last minute.
type callValues struct {
	raw []rawCall
	h   *[NumComponents]*hdr.PackedHistogram // nil until packed
}

// add records one call's components (microseconds; noQueue for a queue
// time it did not have).
func (v *callValues) add(us *[NumComponents]uint32, f *packedFree) {
	if v.h == nil && len(v.raw) < rawMax {
		var rc rawCall
		for c, u := range us {
			rc[c] = noValue
			if u != noQueue {
				rc[c] = bucketOf(int64(u))
			}
		}
		v.raw = append(v.raw, rc)
		return
	}
	v.pack(f)
	for c, u := range us {
		if u != noQueue {
			// Values come from toMicros, inside the range: no error.
			_ = v.packed(c, f).RecordValue(int64(u))
		}
	}
}

// packed returns component c's packed histogram, making it (v.h must
// be set).
func (v *callValues) packed(c int, f *packedFree) *hdr.PackedHistogram {
	if v.h[c] == nil {
		v.h[c] = f.get()
	}
	return v.h[c]
}

// pack moves the raw values into packed histograms.
func (v *callValues) pack(f *packedFree) {
	if v.h == nil {
		v.h = new([NumComponents]*hdr.PackedHistogram)
	}
	v.recordRaw(v.raw, f)
	v.raw = nil
}

// recordRaw records raw calls into the packed histograms.
func (v *callValues) recordRaw(raw []rawCall, f *packedFree) {
	for _, rc := range raw {
		for c, i := range rc {
			if i != noValue {
				_ = v.packed(c, f).RecordValue(bucketValue(i))
			}
		}
	}
}

// addDense adds a dense recorder's counts of component c.
func (v *callValues) addDense(c Component, d *hdr.Histogram, f *packedFree) {
	v.pack(f)
	v.packed(int(c), f).MergeFrom(d)
}

// merge adds src's values.
func (v *callValues) merge(src *callValues, f *packedFree) {
	if src.h != nil {
		v.pack(f)
		for c, h := range src.h {
			if h != nil {
				v.packed(c, f).Merge(h)
			}
		}
	}
	if v.h == nil && len(v.raw)+len(src.raw) <= rawMax {
		v.raw = append(v.raw, src.raw...)
		return
	}
	v.pack(f)
	v.recordRaw(src.raw, f)
}

// release gives the storage back.
func (v *callValues) release(f *packedFree) {
	if v.h != nil {
		for _, h := range v.h {
			f.put(h)
		}
	}
	v.h, v.raw = nil, nil
}

// packedFree is a free list of empty packed histograms, owned by the
// registry and used only under its window lock, so that a busy series
// reuses storage instead of allocating every minute.
type packedFree struct {
	list []*hdr.PackedHistogram
}

// maxFreePacked bounds the free list so a burst of traffic does not pin
// memory after it: what is over it goes to the garbage collector.
const maxFreePacked = 256

func (f *packedFree) get() *hdr.PackedHistogram {
	if n := len(f.list); n > 0 {
		p := f.list[n-1]
		f.list[n-1] = nil
		f.list = f.list[:n-1]
		return p
	}
	return newPacked()
}

func (f *packedFree) put(p *hdr.PackedHistogram) {
	if p == nil || len(f.list) >= maxFreePacked {
		return
	}
	p.Reset()
	f.list = append(f.list, p)
}
