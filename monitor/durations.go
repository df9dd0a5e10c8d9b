package monitor

import (
	"encoding/hex"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The request histogram, infergate_request_duration_seconds: classic
// buckets (durationBuckets) and a native half at schema 5, one per label
// set (the series of a label set differ only in code class, and add up).
//
// Each shard counts its calls' buckets under the lock record holds anyway
// (shardDur), and the counts move into the label set's durHist when the
// shards drain, once a slice; a scrape adds what the shards hold since.
// client_golang's histogram kept the native buckets in two sync.Maps per
// label set (about 8 KiB for a busy model) and took atomic adds and map
// look-ups on every call: 1,000 busy models paid 8 MiB for it.

// durationDesc describes the request histogram.
var durationDesc = prometheus.NewDesc("infergate_request_duration_seconds",
	"Time from arrival at the proxy to the last byte sent to the client.", seriesLabels, nil)

// nativeBounds are the upper bounds, within a power of two, of the schema-5
// buckets as fractions of math.Frexp: client_golang's table, so that a
// value falls in the bucket its histograms gave it.
var nativeBounds = [32]float64{
	0.5, 0.5109485743270583, 0.5221368912137069, 0.5335702003384117,
	0.5452538663326288, 0.5571933712979462, 0.5693943173783458, 0.5818624293887887,
	0.5946035575013605, 0.6076236799902344, 0.620928906036742, 0.6345254785958666,
	0.6484197773255048, 0.6626183215798706, 0.6771277734684463, 0.6919549409819159,
	0.7071067811865475, 0.7225904034885232, 0.7384130729697496, 0.7545822137967112,
	0.7711054127039704, 0.7879904225539431, 0.805245165974627, 0.8228777390769823,
	0.8408964152537144, 0.8593096490612387, 0.8781260801866495, 0.8973545375015533,
	0.9170040432046711, 0.9370838170551498, 0.9576032806985735, 0.9785720620876999,
}

// nativeIndex returns the index of the schema-5 bucket of v seconds
// (v > 0): bucket i holds (2^((i-1)/32), 2^(i/32)].
func nativeIndex(v float64) int32 {
	frac, exp := math.Frexp(v)
	return int32(sort.SearchFloat64s(nativeBounds[:], frac) + (exp-1)*len(nativeBounds))
}

// countSlack is the room countAt leaves when it grows counts.
const countSlack = 4

// countAt adds n to the count of index i in counts, which holds the
// indexes from *lo on, growing it either way as needed.
func countAt[T uint32 | uint64](counts []T, lo *int32, i int32, n T) []T {
	switch {
	case len(counts) == 0:
		*lo = i
		counts = append(counts, 0)
	case i < *lo:
		// Grown by what is needed and a few more, not doubled: a label
		// set's range settles early and its counts live as long as it.
		grown := make([]T, int(*lo-i)+len(counts), int(*lo-i)+len(counts)+countSlack)
		copy(grown[*lo-i:], counts)
		counts, *lo = grown, i
	case int(i-*lo) >= len(counts):
		if n := int(i-*lo) + 1; n > cap(counts) {
			counts = slices.Grow(counts, n-len(counts)+countSlack)
		}
		counts = counts[:int(i-*lo)+1]
	}
	counts[i-*lo] += n
	return counts
}

// shardDur is one shard's calls of the current slice in the request
// histogram's buckets.
type shardDur struct {
	classic [len(durationBuckets) + 1]uint32 // +Inf last
	zero    uint32                           // calls of 0 s (the zero bucket)
	lo      int32                            // native index of native[0]
	native  []uint32
}

// note counts one call and returns its classic bucket (where an
// exemplar of it goes). Called with the shard's lock held.
func (d *shardDur) note(total time.Duration) int {
	sec := total.Seconds()
	// The first bound not below it, as client_golang picks it;
	// len(durationBuckets) for +Inf.
	b := sort.SearchFloat64s(durationBuckets[:], sec)
	d.classic[b]++
	if total <= 0 {
		d.zero++
		return b
	}
	d.native = countAt(d.native, &d.lo, nativeIndex(sec), 1)
	return b
}

// reset empties d for the next slice, keeping its room.
func (d *shardDur) reset() {
	d.classic = [len(d.classic)]uint32{}
	d.zero = 0
	clear(d.native)
	d.native = d.native[:0]
}

// durHist is the request histogram of one label set since its first
// series was made: what its series' shards drained. Guarded by
// Registry.winMu.
type durHist struct {
	created time.Time
	count   uint64
	sum     float64 // seconds
	classic [len(durationBuckets) + 1]uint64
	zero    uint64
	lo      int32
	native  []uint64
}

// add moves a shard's slice into h: d, and the slice's n calls whose
// exact sum is sumNS.
func (h *durHist) add(d *shardDur, n, sumNS int64) {
	h.count += uint64(n)
	h.sum += time.Duration(sumNS).Seconds()
	for i, c := range d.classic {
		h.classic[i] += uint64(c)
	}
	h.zero += uint64(d.zero)
	for k, c := range d.native {
		if c > 0 {
			h.native = countAt(h.native, &h.lo, d.lo+int32(k), uint64(c))
		}
	}
}

// durMetric is one label set's request histogram at a scrape.
type durMetric struct {
	labels []*dto.LabelPair
	h      *dto.Histogram
}

func (m *durMetric) Desc() *prometheus.Desc { return durationDesc }

func (m *durMetric) Write(out *dto.Metric) error {
	out.Label, out.Histogram = m.labels, m.h
	return nil
}

// durationCollector exports the request histogram of every label set,
// each with the exemplars its series kept.
type durationCollector struct{ r *Registry }

func (c durationCollector) Describe(ch chan<- *prometheus.Desc) { ch <- durationDesc }

func (c durationCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.r
	list := r.state.Load().list
	list = append(list[:len(list):len(list)], r.overflow)
	gs := groupsOf(len(list), func(i int) (*durHist, bool) { return list[i].dur, list[i].dur != nil })
	var acc durHist
	var ex exemplarSet
	out := make([]prometheus.Metric, 0, len(gs.order))
	r.winMu.RLock() // no drain moves counts meanwhile
	for _, h := range gs.order {
		acc.count, acc.sum, acc.classic, acc.zero = h.count, h.sum, h.classic, h.zero
		acc.lo, acc.native = h.lo, append(acc.native[:0], h.native...)
		ex = exemplarSet{}
		var key SeriesKey
		for i := gs.first(h); i >= 0; i = gs.next[i] {
			s := list[i]
			key = s.key
			s.pendingInto(&acc, &ex)
		}
		if acc.count == 0 {
			continue // made, not yet recorded into
		}
		l := labelsOf(key)
		out = append(out, &durMetric{labels: prometheus.MakeLabelPairs(durationDesc, l[:]), h: acc.proto(h.created, r.cfg.classic, &ex)})
	}
	r.winMu.RUnlock() // sent unlocked: a rotation does not wait for the scrape's encoding
	for _, m := range out {
		ch <- m
	}
}

// pendingInto adds what s's shards hold since the last drain to acc, and
// their latest exemplar of each bucket to ex (the newest wins).
func (s *Series) pendingInto(acc *durHist, ex *exemplarSet) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.dur != nil && sh.count > 0 {
			acc.add(sh.dur, sh.count, sh.sum[ComponentTotal])
		}
		if sh.ex != nil {
			for b, e := range sh.ex {
				if e.at > ex[b].at {
					ex[b] = e
				}
			}
		}
		sh.mu.Unlock()
	}
}

// proto is h as client_golang's histograms write it: cumulative classic
// buckets (when classic) and the native half, with each classic bucket's
// latest exemplar and, for the native half, all of them oldest first.
func (h *durHist) proto(created time.Time, classic bool, ex *exemplarSet) *dto.Histogram {
	count, sum := h.count, h.sum
	schema, threshold, zero := int32(nativeSchema), prometheus.DefNativeHistogramZeroThreshold, h.zero
	out := &dto.Histogram{
		SampleCount:      &count,
		SampleSum:        &sum,
		CreatedTimestamp: timestamppb.New(created),
		Schema:           &schema,
		ZeroThreshold:    &threshold,
		ZeroCount:        &zero,
	}
	exs := ex.protos()
	if classic {
		bounds := durationBuckets[:] // shared, never written
		buckets := make([]dto.Bucket, len(bounds), len(bounds)+1)
		cums := make([]uint64, len(bounds)+1)
		var cum uint64
		for i := range bounds {
			cum += h.classic[i]
			cums[i] = cum
			buckets[i] = dto.Bucket{CumulativeCount: &cums[i], UpperBound: &bounds[i]}
		}
		if e := exs[len(bounds)]; e != nil {
			// The +Inf bucket is written only to carry its exemplar.
			cums[len(bounds)] = count
			inf := math.Inf(1)
			buckets = append(buckets, dto.Bucket{CumulativeCount: &cums[len(bounds)], UpperBound: &inf})
		}
		out.Bucket = make([]*dto.Bucket, len(buckets))
		for i := range buckets {
			buckets[i].Exemplar = exs[i]
			out.Bucket[i] = &buckets[i]
		}
	}
	out.PositiveSpan, out.PositiveDelta = nativeSpans(h.lo, h.native)
	for _, e := range exs {
		if e != nil {
			out.Exemplars = append(out.Exemplars, e)
		}
	}
	slices.SortFunc(out.Exemplars, func(a, b *dto.Exemplar) int { return a.GetTimestamp().AsTime().Compare(b.GetTimestamp().AsTime()) })
	return out
}

// nativeSpans encodes counts (indexes from lo) as spans and deltas the way
// client_golang does: a gap of one or two empty buckets stays inside a
// span, a longer one starts the next.
func nativeSpans(lo int32, counts []uint64) ([]*dto.BucketSpan, []int64) {
	var spans []*dto.BucketSpan
	var deltas []int64
	var prev int64
	var nextI int32
	for k, c := range counts {
		if c == 0 {
			continue
		}
		i := lo + int32(k)
		gap := i - nextI
		if len(spans) == 0 || gap > 2 {
			length := uint32(0)
			spans = append(spans, &dto.BucketSpan{Offset: &gap, Length: &length})
		} else {
			for range gap {
				*spans[len(spans)-1].Length++
				deltas = append(deltas, -prev)
				prev = 0
			}
		}
		*spans[len(spans)-1].Length++
		deltas = append(deltas, int64(c)-prev)
		prev = int64(c)
		nextI = i + 1
	}
	return spans, deltas
}

// protos returns the set's exemplars as client_golang writes them, by
// bucket (nil where none).
func (set *exemplarSet) protos() [len(durationBuckets) + 1]*dto.Exemplar {
	var out [len(durationBuckets) + 1]*dto.Exemplar
	for b, e := range set {
		if e.at == 0 {
			continue
		}
		name, id, v := ExemplarLabel, hex.EncodeToString(e.trace[:]), time.Duration(e.ns).Seconds()
		out[b] = &dto.Exemplar{
			Label:     []*dto.LabelPair{{Name: &name, Value: &id}},
			Value:     &v,
			Timestamp: timestamppb.New(time.Unix(0, e.at)),
		}
	}
	return out
}
