package monitor

import (
	"math"
	"slices"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// slice is the record of one series over one completed time step (a fine
// slice or a one-minute bucket): each component's values (callValues),
// exact sums and maxima, and the calls that did not queue. 112 bytes: a
// busy series keeps one per second of its last minute.
type slice struct {
	vals callValues
	sum  [NumComponents]int64 // nanoseconds
	max  [NumComponents]int64 // nanoseconds
	// count is the step's calls: 32 bits hold 15 minutes of a series at
	// 4 million calls a second.
	count uint32
	// zeros counts calls with no queue time; they belong to the queue
	// component's distribution but are not stored value by value.
	zeros uint32
	// failed counts the calls of the step that did not end OK, by code
	// (nil when all did, the common case: no allocation).
	failed *codeCounts
}

// codeCount is a number of calls with one gRPC code (index into
// codeNames).
type codeCount struct {
	code uint8
	n    int64
}

type codeCounts []codeCount

// failures returns the slice's failure counts (nil when none).
func (sl *slice) failures() []codeCount {
	if sl.failed == nil {
		return nil
	}
	return *sl.failed
}

// addFailed adds n calls of code i to the slice's failure counts.
func (sl *slice) addFailed(i int, n int64) {
	if sl.failed == nil {
		sl.failed = new(codeCounts)
	}
	f := sl.failed
	for k := range *f {
		if int((*f)[k].code) == i {
			(*f)[k].n += n
			return
		}
	}
	*f = append(*f, codeCount{uint8(i), n})
}

// release gives the slice's storage back to the free list.
func (sl *slice) release(f *packedFree) {
	sl.vals.release(f)
	sl.sum = [NumComponents]int64{}
	sl.max = [NumComponents]int64{}
	sl.count, sl.zeros = 0, 0
	if sl.failed != nil {
		*sl.failed = (*sl.failed)[:0]
	}
}

// merge adds src into sl.
func (sl *slice) merge(src *slice, f *packedFree) {
	sl.vals.merge(&src.vals, f)
	for c := range src.sum {
		sl.sum[c] += src.sum[c]
		sl.max[c] = max(sl.max[c], src.max[c])
	}
	sl.count += src.count
	sl.zeros += src.zeros
	for _, cc := range src.failures() {
		sl.addFailed(int(cc.code), cc.n)
	}
}

// window is the rolling state of one series: a ring of fine slices for the
// 1m window and a ring of one-minute buckets for 5m and 15m. A nil entry is
// a step without calls, so an idle series holds no values.
type window struct {
	fine      []*slice
	finePos   int
	coarse    []*slice // coarse[coarsePos] is the current, partial minute
	coarsePos int
	// done[w] is the sum of the completed minutes window w holds besides
	// the current one, rebuilt once a minute for busy series so that a
	// snapshot merges two slices instead of 15; nil when the minutes hold
	// too few calls to be worth a copy (the snapshot merges them then).
	done      [NumWindows]*slice
	calls     int64 // calls moved into the windows so far
	queueSeen bool
}

// doneMinCalls is the least number of calls in a window's completed
// minutes for which a pre-merged copy is kept.
const doneMinCalls = 4096

func newWindow(slicesPerMinute int) window {
	return window{
		fine:   make([]*slice, slicesPerMinute),
		coarse: make([]*slice, coarseSlots),
	}
}

// rotate closes the current slice of s: it drains the shards into the
// oldest fine slot, adds that slot to the current minute and, when
// minuteDone, starts a new minute in the oldest one-minute bucket. It
// reports whether the slice had calls.
func (s *Series) rotate(f *packedFree, minuteDone bool) bool {
	w := &s.win
	w.finePos = (w.finePos + 1) % len(w.fine)
	sl := s.drain(w.fine[w.finePos], f)
	w.fine[w.finePos] = sl
	if sl != nil {
		cur := w.coarse[w.coarsePos]
		if cur == nil {
			cur = &slice{}
			w.coarse[w.coarsePos] = cur
		}
		cur.merge(sl, f)
		w.calls += int64(sl.count)
	}
	if minuteDone {
		w.coarsePos = (w.coarsePos + 1) % len(w.coarse)
		if old := w.coarse[w.coarsePos]; old != nil {
			old.release(f)
			w.coarse[w.coarsePos] = nil
		}
		w.rebuildDone(f)
	}
	// A series whose streams answer is busy even before one of them ends.
	streamed := false
	if sp := s.stream.Load(); sp != nil {
		streamed = sp.rotate(f, minuteDone)
	}
	return sl != nil || streamed
}

// streamSamples returns the stream samples moved into the windows so far
// (called with Registry.winMu held).
func (s *Series) streamSamples() int64 {
	if sp := s.stream.Load(); sp != nil {
		return sp.samples
	}
	return 0
}

// release frees everything the window holds (the series is dropped).
func (w *window) release(f *packedFree) {
	for i, sl := range w.fine {
		if sl != nil {
			sl.release(f)
			w.fine[i] = nil
		}
	}
	for i, sl := range w.coarse {
		if sl != nil {
			sl.release(f)
			w.coarse[i] = nil
		}
	}
	for i, d := range w.done {
		if d != nil {
			d.release(f)
			w.done[i] = nil
		}
	}
}

// rebuildDone sums the completed minutes of the 5m and 15m windows when
// they hold at least doneMinCalls calls.
func (w *window) rebuildDone(f *packedFree) {
	n := len(w.coarse)
	for _, win := range []Window{Window5m, Window15m} {
		if d := w.done[win]; d != nil {
			d.release(f)
			w.done[win] = nil
		}
		var calls int64
		for k := 1; k < windowMinutes[win]; k++ {
			if sl := w.coarse[(w.coarsePos-k+n)%n]; sl != nil {
				calls += int64(sl.count)
			}
		}
		if calls < doneMinCalls {
			continue
		}
		d := &slice{}
		for k := 1; k < windowMinutes[win]; k++ {
			if sl := w.coarse[(w.coarsePos-k+n)%n]; sl != nil {
				d.merge(sl, f)
			}
		}
		w.done[win] = d
	}
}

// drain moves what the shards recorded since the last rotation into a
// slice, reusing the storage of old (the expiring slot). It returns nil
// when there were no calls. Each shard is locked only to swap its buffer
// and dense histograms out; moving the values happens after unlocking.
func (s *Series) drain(old *slice, f *packedFree) *slice {
	var sl *slice
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.count == 0 {
			sh.mu.Unlock()
			continue
		}
		buf, hs, sums, maxs, n, zeros := sh.buf, sh.h, sh.sum, sh.max, sh.count, sh.queueZeros
		var failed [numCodes]int64
		for i := 1; i < numCodes; i++ { // 0 is OK
			failed[i] = sh.codes[i] - sh.drained[i]
		}
		sh.drained = sh.codes
		if sh.queueSeen {
			s.win.queueSeen = true
		}
		sh.buf = nil
		sh.h = [NumComponents]*hdr.Histogram{}
		sh.sum = [NumComponents]int64{}
		sh.max = [NumComponents]int64{}
		sh.count, sh.queueZeros, sh.queueSeen = 0, 0, false
		if d := sh.dur; d != nil && s.dur != nil {
			s.dur.add(d, n, sums[ComponentTotal])
			d.reset()
		}
		if b := sh.base; b != nil && b.n > 0 {
			// Lock order: shard, then keeper (as record's offer, which
			// takes the keeper's lock after the shard's is released).
			s.slow.addBase(b)
			s.inputs.addBase(b)
			*b = shardBase{}
		}
		sh.mu.Unlock()

		if sl == nil {
			sl = old
			if sl == nil {
				sl = &slice{}
			} else {
				sl.release(f)
			}
		}
		sl.count += uint32(n)
		sl.zeros += uint32(zeros)
		for i, k := range failed {
			if k > 0 {
				sl.addFailed(i, k)
			}
		}
		for c := range Component(NumComponents) {
			sl.sum[c] += sums[c]
			sl.max[c] = max(sl.max[c], maxs[c])
			if h := hs[c]; h != nil {
				sl.vals.addDense(c, h, f)
				h.Reset()
				densePool.Put(h)
			}
		}
		if buf != nil {
			for _, vals := range buf.v[:buf.n] {
				sl.vals.add(&vals, f)
			}
			buf.n = 0
			bufPool.Put(buf)
		}
	}
	if sl == nil && old != nil {
		old.release(f)
	}
	return sl
}

// denseMinCalls is the least number of calls for which the merger uses a
// dense histogram once packed data appears: clearing its 184 KiB costs
// more than packing a few thousand values.
const denseMinCalls = 2048

// merger accumulates slices of one component to compute a window's Stats;
// one is reused across the series of a snapshot. While every slice holds
// raw values it only collects them, and reads quantiles by sorting (the
// common case of a series with few calls); once a slice holds a packed
// histogram it moves to an HDR histogram: dense for many calls (each merge
// is linear in the slice alone), packed for few.
type merger struct {
	d     *hdr.Histogram
	p     *hdr.PackedHistogram
	dense bool
	hist  bool     // values are in d or p, not in raw
	raw   []uint16 // collected bucket indexes while !hist
	zeros int64    // zero values while !hist
	sum   int64
	max   int64
	count int64
}

func newMerger() *merger { return &merger{} }

// reset starts a window; dense says which histogram to use if one is
// needed.
func (m *merger) reset(dense bool) {
	m.dense = dense
	m.hist = false
	m.raw = m.raw[:0]
	m.zeros, m.sum, m.max, m.count = 0, 0, 0, 0
}

// toHist moves the collected raw values into the histogram.
func (m *merger) toHist() {
	if m.hist {
		return
	}
	m.hist = true
	if m.dense {
		if m.d == nil {
			m.d = newDense()
		} else if m.d.TotalCount() > 0 {
			m.d.Reset()
		}
	} else {
		if m.p == nil {
			m.p = newPacked()
		} else {
			m.p.Reset()
		}
	}
	for _, i := range m.raw {
		m.record(bucketValue(i), 1)
	}
	if m.zeros > 0 {
		m.record(0, m.zeros)
	}
	m.raw, m.zeros = m.raw[:0], 0
}

func (m *merger) add(sl *slice, c Component) {
	if sl == nil || sl.count == 0 {
		return
	}
	var zeros int64
	if c == ComponentQueue {
		zeros = int64(sl.zeros)
	}
	v := &sl.vals
	if v.h != nil && v.h[c] != nil {
		m.addPacked(v.h[c])
	}
	if m.hist {
		for _, rc := range v.raw {
			if i := rc[c]; i != noValue {
				m.record(bucketValue(i), 1)
			}
		}
	} else {
		for _, rc := range v.raw {
			if i := rc[c]; i != noValue {
				m.raw = append(m.raw, i)
			}
		}
	}
	m.addRest(zeros, int64(sl.count), sl.sum[c], sl.max[c])
}

// addSet adds count values: those of v plus zeros zero values, whose
// exact sum and maximum are sum and mx.
func (m *merger) addSet(v *valueSet, zeros, count, sum, mx int64) {
	if h := v.h; h != nil {
		m.addPacked(h)
	}
	if m.hist {
		for _, i := range v.raw {
			m.record(bucketValue(i), 1)
		}
	} else {
		m.raw = append(m.raw, v.raw...)
	}
	m.addRest(zeros, count, sum, mx)
}

// addPacked adds a packed histogram's values.
func (m *merger) addPacked(h *hdr.PackedHistogram) {
	m.toHist()
	if m.dense {
		h.MergeInto(m.d)
	} else {
		m.p.Merge(h)
	}
}

// addRest adds zeros zero values and a set's exact count, sum and
// maximum, after its values.
func (m *merger) addRest(zeros, count, sum, mx int64) {
	if m.hist {
		if zeros > 0 {
			m.record(0, zeros)
		}
	} else {
		m.zeros += zeros
	}
	m.sum += sum
	m.max = max(m.max, mx)
	m.count += count
}

// record adds n values us to the histogram.
func (m *merger) record(us, n int64) {
	// Values come from toMicros: in range, no error.
	if m.dense {
		_ = m.d.RecordValues(us, n)
	} else {
		_ = m.p.RecordValues(us, n)
	}
}

// stats reads the merged quantiles, capping each at the exact maximum (HDR
// reports the top of a value's bucket, which can lie above it).
func (m *merger) stats() Stats {
	if m.count == 0 {
		return Stats{}
	}
	st := Stats{
		Count: uint64(m.count),
		Sum:   time.Duration(m.sum),
		Max:   time.Duration(m.max),
	}
	var vs []int64
	var out [len(Quantiles)]int64
	switch {
	case !m.hist:
		vs = rawPercentilesInto(m.raw, m.zeros, percentiles, out[:])
	case m.dense:
		vs = m.d.ValueAtPercentilesSlice(percentiles)
	default:
		vs = m.p.ValueAtPercentilesSlice(percentiles)
	}
	q := func(i int) time.Duration { return min(fromMicros(vs[i]), st.Max) }
	st.P50, st.P90, st.P99, st.P999 = q(0), q(1), q(2), q(3)
	return st
}

// rawPercentilesInto answers what an HDR histogram (this package's geometry)
// holding the values of bucket indexes raw and zeros zero values answers
// for each percentile (all > 0): the top of the bucket at the percentile's
// rank, written into out (len(pcts) long). It sorts raw in place (bucket
// order is value order) and allocates nothing.
func rawPercentilesInto(raw []uint16, zeros int64, pcts []float64, out []int64) []int64 {
	total := int64(len(raw)) + zeros
	for i, p := range pcts {
		out[i] = int64(p/100*float64(total) + 0.5)
	}
	// The ranks are read in place: each is read before its value is
	// written over it.
	return rawAtRanksInto(raw, zeros, out, out)
}

// sortIndexes sorts bucket indexes (bucket order is value order).
func sortIndexes(raw []uint16) { slices.Sort(raw) }

// snapshot computes the Stats of every window (those wins says; nil:
// all) and component of s.
func (s *Series) snapshot(m *merger, at time.Time, wins *[NumWindows]bool) SeriesSnapshot {
	w := &s.win
	ss := SeriesSnapshot{Key: s.key, At: at, Calls: uint64(w.calls), QueueSeen: w.queueSeen}
	cur := w.coarse[w.coarsePos]
	var fineCalls int64
	for _, sl := range w.fine {
		if sl != nil {
			fineCalls += int64(sl.count)
		}
	}
	want := func(win Window) bool { return wins == nil || wins[win] }
	for c := range Component(NumComponents) {
		if want(Window1m) {
			m.reset(fineCalls >= denseMinCalls)
			for _, sl := range w.fine {
				m.add(sl, c)
			}
			ss.Stats[Window1m][c] = m.stats()
		}

		for _, win := range []Window{Window5m, Window15m} {
			if !want(win) {
				continue
			}
			m.reset(false)
			if d := w.done[win]; d != nil {
				m.add(d, c)
			} else {
				n := len(w.coarse)
				for k := 1; k < windowMinutes[win]; k++ {
					m.add(w.coarse[(w.coarsePos-k+n)%n], c)
				}
			}
			m.add(cur, c)
			ss.Stats[win][c] = m.stats()
		}
	}
	if sp := s.stream.Load(); sp != nil {
		ss.Stream = sp.snapshot(m)
	}
	return ss
}

// seconds converts a duration to float64 seconds for Prometheus.
func seconds(d time.Duration) float64 { return d.Seconds() }

// nanOr returns NaN for an empty window, so that Prometheus shows a gap
// rather than a zero latency.
func nanOr(count uint64, v float64) float64 {
	if count == 0 {
		return math.NaN()
	}
	return v
}
