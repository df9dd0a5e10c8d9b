package monitor

import (
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
)

// Series measures the calls of one SeriesKey. Record is safe for concurrent
// use; its calls spread over a few mutex-guarded shards, so they contend
// only when they pick the same shard at the same time.
type Series struct {
	key      SeriesKey
	shards   []shard
	mask     uint32
	tokens   *sync.Pool          // *shardToken, shared by the registry's series
	obs      prometheus.Observer // nil when the request histogram is off
	overflow bool

	unknownMu sync.Mutex
	unknown   map[string]int64 // calls per code name outside codeNames

	win window // guarded by Registry.winMu
}

// shard is one hot recorder. The fields above codes are reset each slice;
// codes and bytes are running totals for the Prometheus counters.
type shard struct {
	mu         sync.Mutex
	h          [NumComponents]*hdr.Histogram // taken from densePool on first use in a slice
	sum        [NumComponents]int64          // nanoseconds
	max        [NumComponents]int64          // nanoseconds
	count      int64
	queueZeros int64 // calls with Queue == 0, kept out of the dense queue histogram
	queueSeen  bool

	codes    [numCodes]int64
	bytesIn  int64
	bytesOut int64

	_ [64]byte // keeps the next shard's mutex off this shard's last cache line
}

// shardToken names the shard a goroutine should try first. Tokens live in a
// sync.Pool, whose per-P cache hands each processor back the token it used
// last: calls on one P keep to one shard (its cache lines stay on that
// core) without reading the processor id.
type shardToken struct{ i uint32 }

func newSeries(key SeriesKey, shards, slicesPerMinute int, tokens *sync.Pool, obs prometheus.Observer) *Series {
	return &Series{
		key:    key,
		shards: make([]shard, shards),
		mask:   uint32(shards - 1),
		tokens: tokens,
		obs:    obs,
		win:    newWindow(slicesPerMinute),
	}
}

// Key returns the series key.
func (s *Series) Key() SeriesKey { return s.key }

// Record records one finished call. It takes one shard mutex, never
// allocates in the steady state and, unless the request histogram is off,
// observes Total in infergate_request_duration_seconds.
func (s *Series) Record(sm Sample) {
	total := max(sm.Total, 0)
	up := max(sm.Upstream, 0)
	q := max(sm.Queue, 0)
	over := max(total-up-q, 0)
	ci := codeIndex(sm.Code)

	tok := s.tokens.Get().(*shardToken)
	sh := s.lock(tok.i)
	sh.count++
	sh.add(ComponentTotal, total)
	sh.add(ComponentUpstream, up)
	sh.add(ComponentOverhead, over)
	if q > 0 {
		sh.add(ComponentQueue, q)
		sh.queueSeen = true
	} else {
		sh.queueZeros++
	}
	if ci >= 0 {
		sh.codes[ci]++
	}
	sh.bytesIn += max(sm.BytesIn, 0)
	sh.bytesOut += max(sm.BytesOut, 0)
	sh.mu.Unlock()
	s.tokens.Put(tok)

	if ci < 0 {
		s.recordUnknownCode(sm.Code)
	}
	if s.obs != nil {
		s.obs.Observe(total.Seconds())
	}
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

func (sh *shard) add(c Component, d time.Duration) {
	ns := int64(d)
	sh.sum[c] += ns
	if ns > sh.max[c] {
		sh.max[c] = ns
	}
	h := sh.h[c]
	if h == nil {
		h = densePool.Get().(*hdr.Histogram)
		sh.h[c] = h
	}
	// toMicros clamps into the trackable range, so this cannot fail.
	_ = h.RecordValue(toMicros(d))
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
