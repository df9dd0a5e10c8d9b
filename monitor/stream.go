package monitor

import (
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// StreamQuantity names one quantity measured inside the streams of a
// series: a stream such as Triton's ModelStreamInfer carries many requests,
// and a decoupled model (an LLM) answers each with many responses, so what
// matters is not the stream's length but each request's wait for its
// first response and the gaps between its responses.
type StreamQuantity int

// The stream quantities.
const (
	// StreamFirstResponse is the time from a request to its first
	// response (TTFR, time to first token for an LLM).
	StreamFirstResponse StreamQuantity = iota
	// StreamResponseGap is the time between two consecutive responses of
	// one request (inter-token latency).
	StreamResponseGap
	// StreamResponses is the number of responses a request got. Its Stats
	// hold n responses as the duration n µs, so that one HDR geometry and
	// one merger serve all three quantities: read it with Value.
	StreamResponses
	NumStreamQuantities = 3
)

var streamQuantityNames = [NumStreamQuantities]string{"first_response", "response_gap", "responses"}

// String returns "first_response", "response_gap" or "responses".
func (q StreamQuantity) String() string {
	if q < 0 || q >= NumStreamQuantities {
		return "unknown"
	}
	return streamQuantityNames[q]
}

// ParseStreamQuantity returns the StreamQuantity named by s.
func ParseStreamQuantity(s string) (StreamQuantity, bool) {
	for i, n := range streamQuantityNames {
		if n == s {
			return StreamQuantity(i), true
		}
	}
	return 0, false
}

// Value returns a Stats value of quantity q in q's unit: seconds for the
// two durations, a number of responses for StreamResponses.
func (q StreamQuantity) Value(d time.Duration) float64 {
	if q == StreamResponses {
		return float64(d) / float64(time.Microsecond)
	}
	return d.Seconds()
}

// ResponsesValue returns n responses as StreamResponses' Stats hold them,
// for comparing a count with those Stats (an alert's threshold).
func ResponsesValue(n float64) time.Duration { return time.Duration(n * float64(time.Microsecond)) }

// StreamSample is what one response, or the end of one request, inside a
// stream adds to its series (Registry.RecordStream). Negative values are
// recorded as 0.
type StreamSample struct {
	// Response says that a response arrived; Wait is the time since the
	// request when First (the request's first response), else since the
	// request's previous response.
	Response bool
	First    bool
	Wait     time.Duration
	// Done says that the request is complete; Responses is how many
	// responses it got.
	Done      bool
	Responses int
}

// StreamDrop says why the meter of a stream left a request or a response
// out of the stream quantities (Registry.StreamDropped).
type StreamDrop int

// The reasons of infergate_stream_dropped_total.
const (
	// StreamDropOutstanding: the stream held as many requests awaiting
	// their final response as its meter keeps, so it forgot the oldest.
	StreamDropOutstanding StreamDrop = iota
	// StreamDropUnmatched: a response whose id matched no request the
	// meter keeps, or that did not parse.
	StreamDropUnmatched
	numStreamDrops
)

var streamDropNames = [numStreamDrops]string{"max_outstanding", "unmatched"}

// StreamStats holds the stream quantities of one series, indexed
// [Window][StreamQuantity]; quantiles are exact as Stats' are.
type StreamStats [NumWindows][NumStreamQuantities]Stats

// RecordStream records one response or request end inside a stream under
// key, with the series' bounds: the same cap, overflow series, label
// checks and idle expiry as Record (a series with stream samples is not
// idle). It takes one shard mutex and does not allocate in the steady
// state; the stream part of a series is created on its first sample.
// Samples are not calls: infergate_series_overflow_total does not count
// them (the stream's own call is counted when it ends).
func (r *Registry) RecordStream(key SeriesKey, sm StreamSample) {
	for {
		s, _ := r.lookup(key)
		if s.recordStream(sm) {
			return
		}
		// Dropped as we found it: see Record.
		r.mu.Lock()
		r.mu.Unlock()
	}
}

// StreamDropped counts one request or response a stream meter left out,
// in infergate_stream_dropped_total{reason}.
func (r *Registry) StreamDropped(reason StreamDrop) {
	if reason >= 0 && reason < numStreamDrops {
		r.streamDrops[reason].Add(1)
	}
}

// streamPart is the stream quantities of one series: hot shards like the
// series' own, and rings of slices rotated with the series' window.
type streamPart struct {
	shards []streamShard
	mask   uint32

	// Guarded by Registry.winMu, like Series.win.
	fine      []*streamSlice
	finePos   int
	coarse    []*streamSlice // coarse[coarsePos] is the current minute
	coarsePos int
	samples   int64 // values moved into the windows so far
}

// streamShard is one hot recorder of a streamPart; every field but mu is
// reset each slice.
type streamShard struct {
	mu    sync.Mutex
	buf   *streamBuf
	h     [NumStreamQuantities]*hdr.Histogram // from densePool once a quantity's buffer fills in a slice
	sum   [NumStreamQuantities]int64          // nanoseconds
	max   [NumStreamQuantities]int64
	count [NumStreamQuantities]int64
	_     [64]byte // see shard
}

// streamBuf holds up to bufCap raw values (microseconds) per quantity.
type streamBuf struct {
	n [NumStreamQuantities]int
	v [NumStreamQuantities][bufCap]uint32
}

var streamBufPool = sync.Pool{New: func() any { return new(streamBuf) }}

// streamSlice is a streamPart's record of one completed step.
type streamSlice struct {
	v     [NumStreamQuantities]valueSet
	sum   [NumStreamQuantities]int64
	max   [NumStreamQuantities]int64
	count [NumStreamQuantities]int64
}

func newStreamPart(shards, slicesPerMinute int) *streamPart {
	return &streamPart{
		shards: make([]streamShard, shards),
		mask:   uint32(shards - 1),
		fine:   make([]*streamSlice, slicesPerMinute),
		coarse: make([]*streamSlice, coarseSlots),
	}
}

// streamPart returns the series' stream part, creating it, or nil when
// the series was dropped. It is created under a shard lock of the series
// so that Registry.drop, which holds them all, either sees it or leaves
// it uncreated.
func (s *Series) streamPart() *streamPart {
	if sp := s.stream.Load(); sp != nil {
		return sp
	}
	sh := &s.shards[0]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sp := s.stream.Load(); sp != nil || s.dead.Load() {
		return sp
	}
	sp := newStreamPart(len(s.shards), len(s.win.fine))
	s.stream.Store(sp)
	return sp
}

// recordStream records one stream sample and reports true, or reports
// false when the series was dropped.
func (s *Series) recordStream(sm StreamSample) bool {
	sp := s.streamPart()
	if sp == nil {
		return false
	}
	tok := s.tokens.Get().(*shardToken)
	defer s.tokens.Put(tok)
	sh := sp.lock(tok.i)
	defer sh.mu.Unlock()
	if s.dead.Load() {
		return false
	}
	if sm.Response {
		q := StreamResponseGap
		if sm.First {
			q = StreamFirstResponse
		}
		sh.add(q, max(sm.Wait, 0))
	}
	if sm.Done {
		sh.add(StreamResponses, time.Duration(max(sm.Responses, 0))*time.Microsecond)
	}
	return true
}

// lock is Series.lock over the stream shards. It is written again rather
// than shared through a generic over both shard types because Series.lock
// is on every call's path, where a generic's indirect call would cost.
func (sp *streamPart) lock(hint uint32) *streamShard {
	i := hint & sp.mask
	for range len(sp.shards) {
		if sh := &sp.shards[i]; sh.mu.TryLock() {
			return sh
		}
		i = (i + 1) & sp.mask
	}
	sh := &sp.shards[i]
	sh.mu.Lock()
	return sh
}

// add records one value of q.
func (sh *streamShard) add(q StreamQuantity, d time.Duration) {
	ns := int64(d)
	sh.sum[q] += ns
	sh.max[q] = max(sh.max[q], ns)
	sh.count[q]++
	b := sh.buf
	if b == nil {
		b = streamBufPool.Get().(*streamBuf)
		sh.buf = b
	}
	if b.n[q] == bufCap {
		h := sh.h[q]
		if h == nil {
			h = densePool.Get().(*hdr.Histogram)
			sh.h[q] = h
		}
		for _, us := range b.v[q] {
			_ = h.RecordValue(int64(us)) // from toMicros: in range
		}
		b.n[q] = 0
	}
	b.v[q][b.n[q]] = uint32(toMicros(d))
	b.n[q]++
}

// busy reports whether a shard holds values of this slice; the caller
// holds every shard lock.
func (sp *streamPart) busy() bool {
	for i := range sp.shards {
		for _, n := range sp.shards[i].count {
			if n > 0 {
				return true
			}
		}
	}
	return false
}

// drain moves what the shards recorded since the last rotation into a
// slice, reusing old's storage; nil when nothing was recorded.
func (sp *streamPart) drain(old *streamSlice, f *packedFree) *streamSlice {
	var sl *streamSlice
	for i := range sp.shards {
		sh := &sp.shards[i]
		sh.mu.Lock()
		if sh.count == [NumStreamQuantities]int64{} {
			sh.mu.Unlock()
			continue
		}
		buf, hs, sums, maxs, counts := sh.buf, sh.h, sh.sum, sh.max, sh.count
		sh.buf, sh.h = nil, [NumStreamQuantities]*hdr.Histogram{}
		sh.sum, sh.max, sh.count = [NumStreamQuantities]int64{}, [NumStreamQuantities]int64{}, [NumStreamQuantities]int64{}
		sh.mu.Unlock()

		if sl == nil {
			sl = old
			if sl == nil {
				sl = &streamSlice{}
			} else {
				sl.release(f)
			}
		}
		for q := range StreamQuantity(NumStreamQuantities) {
			sl.sum[q] += sums[q]
			sl.max[q] = max(sl.max[q], maxs[q])
			sl.count[q] += counts[q]
			if h := hs[q]; h != nil {
				sl.v[q].addDense(h, f)
				h.Reset()
				densePool.Put(h)
			}
			if buf != nil {
				for _, us := range buf.v[q][:buf.n[q]] {
					sl.v[q].add(us, f)
				}
			}
		}
		if buf != nil {
			buf.n = [NumStreamQuantities]int{}
			streamBufPool.Put(buf)
		}
	}
	if sl == nil && old != nil {
		old.release(f)
	}
	return sl
}

// rotate closes the current slice as Series.rotate does the window's, and
// reports whether it had values.
func (sp *streamPart) rotate(f *packedFree, minuteDone bool) bool {
	sp.finePos = (sp.finePos + 1) % len(sp.fine)
	sl := sp.drain(sp.fine[sp.finePos], f)
	sp.fine[sp.finePos] = sl
	if sl != nil {
		cur := sp.coarse[sp.coarsePos]
		if cur == nil {
			cur = &streamSlice{}
			sp.coarse[sp.coarsePos] = cur
		}
		cur.merge(sl, f)
		for _, n := range sl.count {
			sp.samples += n
		}
	}
	if minuteDone {
		sp.coarsePos = (sp.coarsePos + 1) % len(sp.coarse)
		if old := sp.coarse[sp.coarsePos]; old != nil {
			old.release(f)
			sp.coarse[sp.coarsePos] = nil
		}
	}
	return sl != nil
}

// release frees every slice (the series is dropped).
func (sp *streamPart) release(f *packedFree) {
	for _, ring := range [][]*streamSlice{sp.fine, sp.coarse} {
		for i, sl := range ring {
			if sl != nil {
				sl.release(f)
				ring[i] = nil
			}
		}
	}
}

func (sl *streamSlice) release(f *packedFree) {
	for q := range sl.v {
		sl.v[q].release(f)
	}
	sl.sum, sl.max, sl.count = [NumStreamQuantities]int64{}, [NumStreamQuantities]int64{}, [NumStreamQuantities]int64{}
}

func (sl *streamSlice) merge(src *streamSlice, f *packedFree) {
	for q := range src.v {
		sl.v[q].merge(&src.v[q], f)
		sl.sum[q] += src.sum[q]
		sl.max[q] = max(sl.max[q], src.max[q])
		sl.count[q] += src.count[q]
	}
}

// addTo adds quantity q of sl (nil: nothing) to m.
func (sl *streamSlice) addTo(m *merger, q StreamQuantity) {
	if sl != nil && sl.count[q] > 0 {
		m.addSet(&sl.v[q], 0, sl.count[q], sl.sum[q], sl.max[q])
	}
}

// snapshot computes the Stats of every window and quantity, as
// Series.snapshot does for the components (without the pre-merged
// minutes: a snapshot merges up to 15 one-minute slices per quantity).
func (sp *streamPart) snapshot(m *merger) *StreamStats {
	st := new(StreamStats)
	n := len(sp.coarse)
	for q := range StreamQuantity(NumStreamQuantities) {
		var fine int64
		for _, sl := range sp.fine {
			if sl != nil {
				fine += sl.count[q]
			}
		}
		m.reset(fine >= denseMinCalls)
		for _, sl := range sp.fine {
			sl.addTo(m, q)
		}
		st[Window1m][q] = m.stats()
		for _, win := range []Window{Window5m, Window15m} {
			m.reset(false)
			for k := range windowMinutes[win] {
				sp.coarse[(sp.coarsePos-k+n)%n].addTo(m, q)
			}
			st[win][q] = m.stats()
		}
	}
	return st
}

// recent adds quantity q of the last k fine slices to m.
func (sp *streamPart) recent(m *merger, q StreamQuantity, k int) {
	for i := range k {
		sp.fine[(sp.finePos-i+len(sp.fine))%len(sp.fine)].addTo(m, q)
	}
}
