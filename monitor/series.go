package monitor

import (
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Series measures the calls of one SeriesKey. Recording (Registry.Record)
// is safe for concurrent use; the calls spread over a few mutex-guarded
// shards, so they contend only when they pick the same shard at the same
// time.
type Series struct {
	key      SeriesKey
	shards   []shard
	mask     uint32
	tokens   *sync.Pool       // *shardToken, shared by the registry's series
	dur      *durHist         // the label set's request histogram; nil when it is off
	now      func() time.Time // stamps exemplars
	overflow bool
	// dead is set, under every shard lock, when the registry drops the
	// series; a Record that finds it set goes back to the registry.
	dead atomic.Bool
	// lastTick is the registry tick of the last slice with calls (guarded
	// by Registry.winMu).
	lastTick int

	unknownMu sync.Mutex
	unknown   map[string]int64 // calls per code name outside codeNames

	win window // guarded by Registry.winMu
	// inputs counts the calls by request bytes and rows (inputs.go),
	// running totals as of the last rotation, folded in from the
	// shards' slow-call baseline (guarded by Registry.winMu): one count
	// of bytes and rows per call serves both.
	inputs InputCounts
	// stream holds the stream quantities (stream.go); nil until the
	// series' first stream sample, so a unary series pays one pointer.
	stream atomic.Pointer[streamPart]
	// slow keeps the slowest calls of the series' model and version,
	// shared by its series (slow.go); nil for the overflow series.
	slow *slowKeeper
}

// shard is one hot recorder. The fields above codes are reset each slice;
// codes and bytes are running totals for the Prometheus counters.
type shard struct {
	mu         sync.Mutex
	buf        *callBuf                      // taken from bufPool on the first call of a slice
	h          [NumComponents]*hdr.Histogram // taken from densePool when buf overflows in a slice
	sum        [NumComponents]int64          // nanoseconds
	max        [NumComponents]int64          // nanoseconds
	count      int64
	queueZeros int64 // calls with Queue == 0, kept out of the dense queue histogram
	queueSeen  bool

	codes    [numCodes]int64
	bytesIn  int64
	bytesOut int64
	// drained is codes at the last drain: the slice's failures are the
	// difference, so the hot path counts each code once.
	drained [numCodes]int64
	// ex is the latest exemplar of each request histogram bucket; nil
	// until the shard records a traced call (exemplar.go).
	ex *exemplarSet
	// base counts the slice's calls for the slow-call baseline; nil
	// until the shard records a call of a series with a keeper.
	base *shardBase
	// dur counts the slice's calls in the request histogram's buckets;
	// nil until the shard records a call (durations.go).
	dur *shardDur

	_ [64]byte // keeps the next shard's mutex off this shard's last cache line
}

// shardToken names the shard a goroutine should try first. Tokens live in a
// sync.Pool, whose per-P cache hands each processor back the token it used
// last: calls on one P keep to one shard (its cache lines stay on that
// core) without reading the processor id.
type shardToken struct{ i uint32 }

func newSeries(key SeriesKey, shards, slicesPerMinute int, tokens *sync.Pool, dur *durHist,
	now func() time.Time) *Series {
	return &Series{
		key:    key,
		now:    now,
		shards: make([]shard, shards),
		mask:   uint32(shards - 1),
		tokens: tokens,
		dur:    dur,
		win:    newWindow(slicesPerMinute),
	}
}

// record records one finished call and reports true, or reports false
// without recording when the series was dropped. It takes one shard mutex,
// never allocates in the steady state and, unless the request histogram is
// off, counts Total in infergate_request_duration_seconds' buckets, keeping
// a traced call's trace id as its bucket's exemplar.
func (s *Series) record(sm Sample) bool {
	total := max(sm.Total, 0)
	up := max(sm.Upstream, 0)
	q := max(sm.Queue, 0)
	over := max(total-up-q, 0)
	ci := codeIndex(sm.Code)

	tok := s.tokens.Get().(*shardToken)
	sh := s.lock(tok.i)
	if s.dead.Load() {
		sh.mu.Unlock()
		s.tokens.Put(tok)
		return false
	}
	sh.count++
	sh.note(ComponentTotal, total)
	sh.note(ComponentUpstream, up)
	sh.note(ComponentOverhead, over)
	if q > 0 {
		sh.note(ComponentQueue, q)
		sh.queueSeen = true
	} else {
		sh.queueZeros++
	}
	b := sh.buf
	if b == nil {
		b = bufPool.Get().(*callBuf)
		sh.buf = b
	}
	qv := noQueue
	if q > 0 {
		qv = uint32(toMicros(q))
	}
	b.v[b.n] = [NumComponents]uint32{uint32(toMicros(total)), uint32(toMicros(up)), uint32(toMicros(over)), qv}
	b.n++
	if b.n == bufCap {
		sh.spill()
	}
	if ci >= 0 {
		sh.codes[ci]++
	}
	sh.bytesIn += max(sm.BytesIn, 0)
	sh.bytesOut += max(sm.BytesOut, 0)
	if s.dur != nil {
		if sh.dur == nil {
			sh.dur = new(shardDur) // once per shard, not per call
		}
		b := sh.dur.note(total)
		if sm.TraceID != ([16]byte{}) {
			sh.noteExemplar(b, sm.TraceID, total, s.now())
		}
	}
	if s.slow != nil {
		if sh.base == nil {
			sh.base = new(shardBase) // once per shard, not per call
		}
		sh.base.note(&sm.Features)
	}
	sh.mu.Unlock()
	s.tokens.Put(tok)
	if s.slow != nil {
		s.slow.offer(&s.key, &sm, total, s.now)
	}

	if ci < 0 {
		s.recordUnknownCode(sm.Code)
	}
	return true
}

// lock locks shard hint, or the next free one when it is busy (another
// goroutine on this P was preempted holding it, or the token is new).
func (s *Series) lock(hint uint32) *shard {
	i := hint & s.mask
	for range len(s.shards) {
		sh := &s.shards[i]
		if sh.mu.TryLock() {
			return sh
		}
		i = (i + 1) & s.mask
	}
	sh := &s.shards[i]
	sh.mu.Lock()
	return sh
}

// note adds one value to a component's exact sum and max.
func (sh *shard) note(c Component, d time.Duration) {
	ns := int64(d)
	sh.sum[c] += ns
	if ns > sh.max[c] {
		sh.max[c] = ns
	}
}

// noQueue marks, in a call buffer, a call that did not queue: it is
// counted in queueZeros instead (one hour in microseconds is below it).
const noQueue = ^uint32(0)

// spill moves a full call buffer into dense histograms: only a shard that
// records more than bufCap calls in a slice pays for them. Zero queue
// times are counted in queueZeros, not recorded.
func (sh *shard) spill() {
	b := sh.buf
	for c := range Component(NumComponents) {
		h := sh.h[c]
		for i := range b.n {
			us := b.v[i][c]
			if us == noQueue {
				continue
			}
			if h == nil {
				h = densePool.Get().(*hdr.Histogram)
				sh.h[c] = h
			}
			// toMicros clamps into the trackable range, so this cannot fail.
			_ = h.RecordValue(int64(us))
		}
	}
	b.n = 0
}

// recordUnknownCode counts a code name outside the gRPC table; it is slow
// on purpose, as only a misbehaving caller gets here.
func (s *Series) recordUnknownCode(code string) {
	s.unknownMu.Lock()
	if s.unknown == nil {
		s.unknown = make(map[string]int64)
	}
	s.unknown[code]++
	s.unknownMu.Unlock()
}

// totals holds the running counters of a series, read at scrape time.
type totals struct {
	codes    [numCodes]int64
	unknown  map[string]int64
	bytesIn  int64
	bytesOut int64
}

// calls returns the number of calls the totals count.
func (t *totals) calls() int64 {
	var n int64
	for _, c := range t.codes {
		n += c
	}
	for _, c := range t.unknown {
		n += c
	}
	return n
}

func (s *Series) totals() totals {
	var t totals
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for c, n := range sh.codes {
			t.codes[c] += n
		}
		t.bytesIn += sh.bytesIn
		t.bytesOut += sh.bytesOut
		sh.mu.Unlock()
	}
	s.unknownMu.Lock()
	if len(s.unknown) > 0 {
		t.unknown = make(map[string]int64, len(s.unknown))
		for k, v := range s.unknown {
			t.unknown[k] = v
		}
	}
	s.unknownMu.Unlock()
	return t
}
