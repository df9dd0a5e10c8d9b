package monitor

import (
	"iter"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/infergate/infergate/internal/grow"
)

// The slowest calls, kept. Each (model, version) has a
// slowKeeper, shared by that model's series: the N slowest calls of each
// step (a tenth of a minute at the default slice length), with what they
// carried and how they were served, plus a baseline of every call of the
// step (request bytes, rows, input shapes) so that a reader can say how
// the slow calls differ from all of them.
//
// The hot path: a call no slower than the N-th slowest of the current
// step is turned away by one atomic load (threshold), without a lock or an
// allocation. Only a call that enters the set takes the keeper's mutex.
// The baseline is counted in the series' shard under the lock record
// holds anyway, and moved into the keeper when the shards drain.
//
// Memory: a step holds at most N calls (slowCallBytes each, plus its
// inputs' string, shared by calls of one shape through a small cache) and
// one callBase (callBaseBytes). A keeper has stepsPerMinute+1 fine steps
// (the 1m window and the current step) and coarseSlots minutes (5m, 15m),
// allocated only while they hold calls: SlowKeeperBytes(n) per model at
// most, and the registry has at most one keeper per series.

// DefaultSlowCalls is the number of slowest calls kept per step and model
// when Options.SlowCalls is 0.
const DefaultSlowCalls = 10

// MaxSlowCalls bounds Options.SlowCalls and Config.SlowCalls.
const MaxSlowCalls = 100

// slowStepsPerMinute is the finest step of the slow-call keeper: ten
// seconds, or coarser when the slice length does not divide it.
const slowStepsPerMinute = 6

// slowGroup names a keeper.
type slowGroup struct{ model, version string }

// slowCall is one kept call: slowCallBytes, plus what it points to. A
// busy model keeps up to N of them per step for 15 minutes, so they are
// compact: parts in microseconds, sizes and counts in the fewest bytes
// that hold them (saturating), the code as its index, the inputs as a
// pointer to the keeper's entry for their shape (calls of one shape
// share it), and the trace id and batch id, which most calls lack,
// behind a pointer allocated only for a call that has one.
type slowCall struct {
	at    int64      // Unix ns when recorded
	total int64      // ns: what calls are ranked by
	key   *SeriesKey // the series' own key: method, upstream, route
	shape *slowShape // nil when the inputs are unknown
	extra *slowExtra // nil without a trace or batch id
	// upstreamUS and queueUS are microseconds.
	upstreamUS, queueUS uint32
	bytesIn, bytesOut   uint32
	rows                uint32
	numInputs           uint16
	code                int8 // codeNames index; -1 a name outside them
	attempts            uint8
	partial             bool
}

// slowShape is the inputs of calls of one shape: its key (0 when the
// shape has none) and their string ("INPUT0:FP32[8,3,224,224] ...").
type slowShape struct {
	key    uint64
	inputs string
}

// slowExtra is what only some calls carry.
type slowExtra struct {
	trace   [16]byte
	batchID uint64
}

func (c *slowCall) inputs() string {
	if c.shape == nil {
		return ""
	}
	return c.shape.inputs
}

func (c *slowCall) shapeKey() uint64 {
	if c.shape == nil {
		return 0
	}
	return c.shape.key
}

func (c *slowCall) trace() [16]byte {
	if c.extra == nil {
		return [16]byte{}
	}
	return c.extra.trace
}

func (c *slowCall) batchID() uint64 {
	if c.extra == nil {
		return 0
	}
	return c.extra.batchID
}

// sat32 is v in a uint32, saturating; sat16 and sat8 likewise.
func sat32(v int64) uint32 { return uint32(min(max(v, 0), math.MaxUint32)) }
func sat16(v int64) uint16 { return uint16(min(max(v, 0), math.MaxUint16)) }
func sat8(v int64) uint8   { return uint8(min(max(v, 0), math.MaxUint8)) }

// codeName is the name of code index i (codeIndex), "Unknown" outside
// the table.
func codeName(i int8) string {
	if i < 0 || int(i) >= numCodes {
		return "Unknown"
	}
	return codeNames[i]
}

// slowCallBytes is the size of one slowCall without its inputs' string.
const slowCallBytes = int(unsafe.Sizeof(slowCall{}))

// Histogram geometry of callBase: values below 2 exact, then two
// buckets per power of two (a bucket's middle is within 20% of any value
// in it), up to 2^32 (a gRPC message is smaller; larger values share the
// last bucket). Small, because a busy model keeps one per step.
const (
	baseBuckets = 64
	// baseShapes is the number of distinct input shapes a step counts
	// (space-saving: a shape outside them replaces the least counted).
	baseShapes = 8
	// shardShapes is the same for one shard's slice.
	shardShapes = 4
)

// logHist counts values in baseBuckets buckets.
type logHist [baseBuckets]uint32

func histBucket(v int64) int {
	if v < 2 {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 // >= 1
	i := 2*e + int(uint64(v)>>(e-1)&1)
	return min(i, baseBuckets-1)
}

// bucketMid is a value in the middle of bucket i: its low bound plus half
// its width.
func bucketMid(i int) float64 {
	if i < 2 {
		return float64(i)
	}
	e, sub := i/2, i%2
	lo := float64(uint64(2+sub) << (e - 1))
	return lo + float64(uint64(1)<<(e-1))/2
}

// shapeCount is one shape's calls in a sketch.
type shapeCount struct {
	key uint64
	n   uint32
}

// callBase is the baseline of one step: every call's request bytes,
// rows and input shape.
type callBase struct {
	n      int64
	bytes  stepHist
	rows   stepHist
	shapes [baseShapes]shapeCount
}

// stepHist counts values in logHist's buckets, holding only the buckets
// used: a model's calls mostly fall in a few (its tensor sizes, its batch
// sizes), and a busy model keeps a callBase per step for 15 minutes. Up
// to stepHistInline buckets are held inline in ascending order (40 bytes
// in all, not logHist's 256); a step whose calls fall in more moves to a
// full logHist.
type stepHist struct {
	used uint8
	idx  [stepHistInline]uint8
	n    [stepHistInline]uint32
	full *logHist
}

const stepHistInline = 6

// add counts c values in bucket i.
func (h *stepHist) add(i int, c uint32) {
	if h.full != nil {
		h.full[i] += c
		return
	}
	k := 0
	for k < int(h.used) && int(h.idx[k]) < i {
		k++
	}
	if k < int(h.used) && int(h.idx[k]) == i {
		h.n[k] += c
		return
	}
	if int(h.used) == stepHistInline {
		h.full = new(logHist)
		for j := range h.used {
			h.full[h.idx[j]] = h.n[j]
		}
		h.full[i] += c
		return
	}
	copy(h.idx[k+1:h.used+1], h.idx[k:h.used])
	copy(h.n[k+1:h.used+1], h.n[k:h.used])
	h.idx[k], h.n[k] = uint8(i), c
	h.used++
}

// addLog adds a full histogram's counts.
func (h *stepHist) addLog(o *logHist) {
	for i, c := range o {
		if c > 0 {
			h.add(i, c)
		}
	}
}

// addStep adds another step's counts.
func (h *stepHist) addStep(o *stepHist) {
	for i, c := range o.all() {
		if c > 0 {
			h.add(i, c)
		}
	}
}

// all yields each bucket's index and count in ascending order (a full
// table's empty buckets included).
func (h *stepHist) all() iter.Seq2[int, uint32] {
	return func(yield func(int, uint32) bool) {
		if h.full != nil {
			for i, c := range h.full {
				if !yield(i, c) {
					return
				}
			}
			return
		}
		for j := range h.used {
			if !yield(int(h.idx[j]), h.n[j]) {
				return
			}
		}
	}
}

// median returns the median of the counted values (a bucket's middle), 0
// when none.
func (h *stepHist) median(n int64) float64 {
	if n <= 0 {
		return 0
	}
	rank := (n + 1) / 2
	var seen int64
	for i, c := range h.all() {
		seen += int64(c)
		if seen >= rank {
			return bucketMid(i)
		}
	}
	return 0
}

// callBaseBytes is the size of one callBase.
const callBaseBytes = int(unsafe.Sizeof(callBase{}))

// shardBase is a shard's count of the same, for the current slice.
type shardBase struct {
	n      int64
	bytes  logHist
	rows   logHist
	shapes [shardShapes]shapeCount
}

// note counts one call. Called with the shard's lock held.
func (b *shardBase) note(f *CallFeatures) {
	b.n++
	b.bytes[histBucket(f.BytesIn)]++
	b.rows[histBucket(f.Rows)]++
	if f.ShapeKey != 0 {
		addShape(b.shapes[:], f.ShapeKey, 1)
	}
}

// addShape adds n calls of shape key to a space-saving sketch: a shape
// not in it replaces the least counted, taking its count plus n (so the
// count of a shape is an upper bound, exact for a shape never evicted).
func addShape(s []shapeCount, key uint64, n uint32) {
	low := 0
	for i := range s {
		if s[i].key == key {
			s[i].n += n
			return
		}
		if s[i].n < s[low].n {
			low = i
		}
	}
	s[low] = shapeCount{key: key, n: s[low].n + n}
}

func (b *callBase) addShard(s *shardBase) {
	b.n += s.n
	b.bytes.addLog(&s.bytes)
	b.rows.addLog(&s.rows)
	for _, sc := range s.shapes {
		if sc.n > 0 {
			addShape(b.shapes[:], sc.key, sc.n)
		}
	}
}

func (b *callBase) add(o *callBase) {
	b.n += o.n
	b.bytes.addStep(&o.bytes)
	b.rows.addStep(&o.rows)
	for _, sc := range o.shapes {
		if sc.n > 0 {
			addShape(b.shapes[:], sc.key, sc.n)
		}
	}
}

// slowStep is one step (or one minute) of a keeper.
type slowStep struct {
	calls []slowCall // at most n, unordered
	base  callBase
}

func (st *slowStep) empty() bool { return len(st.calls) == 0 && st.base.n == 0 }

func (st *slowStep) reset() {
	clear(st.calls) // drop the string and key references
	st.calls = st.calls[:0]
	st.base = callBase{}
}

// insert keeps c if it is among the n slowest of st, and returns the
// latency a call must exceed to enter from now on (0 while fewer than n).
func (st *slowStep) insert(c *slowCall, n int) int64 {
	if len(st.calls) < n {
		// Grown to what the calls need, never past n: a quiet model's
		// steps stay small.
		st.calls = append(grow.Capped(st.calls, 2, n), *c)
	} else {
		low := 0
		for i := range st.calls {
			if st.calls[i].total < st.calls[low].total {
				low = i
			}
		}
		if c.total <= st.calls[low].total {
			return st.calls[low].total
		}
		st.calls[low] = *c
	}
	if len(st.calls) < n {
		return 0
	}
	m := st.calls[0].total
	for i := range st.calls {
		m = min(m, st.calls[i].total)
	}
	return m
}

// merge adds src's calls (keeping the n slowest) and baseline into st.
func (st *slowStep) merge(src *slowStep, n int) {
	for i := range src.calls {
		st.insert(&src.calls[i], n)
	}
	st.base.add(&src.base)
}

// slowKeeper keeps the slowest calls of one (model, version).
type slowKeeper struct {
	group slowGroup
	n     int
	// threshold is the latency (ns) a call must exceed to enter the
	// current step: the N-th slowest of it, 0 while it has fewer.
	threshold atomic.Int64

	mu        sync.Mutex
	cur       *slowStep   // the current step, nil until it has something
	fine      []*slowStep // the completed steps of the last minute, a ring
	finePos   int
	coarse    []*slowStep // minutes; coarse[coarsePos] is the current one (its completed steps)
	coarsePos int
	spare     *slowStep // a step to reuse, so the steady state does not allocate
	// shapes caches the inputs of recent shapes: slow calls of a known
	// shape share one entry and cost no allocation.
	shapes    [4]*slowShape
	shapeNext int
}

func newSlowKeeper(g slowGroup, n, stepsPerMinute int) *slowKeeper {
	return &slowKeeper{group: g, n: n, fine: make([]*slowStep, stepsPerMinute), coarse: make([]*slowStep, coarseSlots)}
}

// step returns a cleared step. Called with mu held.
func (k *slowKeeper) step() *slowStep {
	if st := k.spare; st != nil {
		k.spare = nil
		return st
	}
	return &slowStep{}
}

// recycle keeps st for reuse. Called with mu held.
func (k *slowKeeper) recycle(st *slowStep) {
	if st != nil && k.spare == nil {
		st.reset()
		k.spare = st
	}
}

// offer keeps a finished call if it is among the N slowest of the
// current step. key must be the series' own key (it is kept).
func (k *slowKeeper) offer(key *SeriesKey, sm *Sample, total time.Duration, at func() time.Time) {
	ns := int64(total)
	if ns <= k.threshold.Load() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if ns <= k.threshold.Load() {
		return
	}
	if k.cur == nil {
		k.cur = k.step()
	}
	f := &sm.Features
	c := slowCall{
		at: at().UnixNano(), total: ns, upstreamUS: sat32(sm.Upstream.Microseconds()), queueUS: sat32(sm.Queue.Microseconds()),
		bytesIn: sat32(sm.BytesIn), bytesOut: sat32(sm.BytesOut), rows: sat32(f.Rows),
		key: key, code: int8(codeIndex(sm.Code)), attempts: sat8(int64(sm.Attempts)),
		numInputs: sat16(int64(f.NumInputs)), partial: f.Partial,
	}
	if sm.TraceID != ([16]byte{}) || sm.BatchID != 0 {
		c.extra = &slowExtra{trace: sm.TraceID, batchID: sm.BatchID}
	}
	c.shape = k.shapeOf(f)
	k.threshold.Store(k.cur.insert(&c, k.n))
}

// shapeOf returns the inputs of f's shape, from the cache when the shape
// is known; nil when f says nothing of its inputs. Called with mu held.
func (k *slowKeeper) shapeOf(f *CallFeatures) *slowShape {
	if f.ShapeKey != 0 {
		for _, e := range k.shapes {
			if e != nil && e.key == f.ShapeKey {
				return e
			}
		}
	}
	in := f.Inputs
	if in == nil && f.Lazy != nil {
		in = f.Lazy.CallInputs()
	}
	if len(in) == 0 && f.ShapeKey == 0 {
		return nil
	}
	sh := &slowShape{key: f.ShapeKey}
	if len(in) > 0 {
		sh.inputs = formatInputs(in, f.NumInputs)
	}
	if f.ShapeKey != 0 {
		k.shapes[k.shapeNext] = sh
		k.shapeNext = (k.shapeNext + 1) % len(k.shapes)
	}
	return sh
}

// formatInputs joins the inputs' strings with spaces, with " ..." when
// the request had more than those kept.
func formatInputs(in []InputShape, total int) string {
	b := make([]byte, 0, 64)
	for i, s := range in {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, s.String()...)
	}
	if total > len(in) {
		b = append(b, " ..."...)
	}
	return string(b)
}

// addBase moves a shard's baseline into the current step. Called with the
// shard's lock held (lock order: shard, then keeper).
func (k *slowKeeper) addBase(b *shardBase) {
	k.mu.Lock()
	if k.cur == nil {
		k.cur = k.step()
	}
	k.cur.base.addShard(b)
	k.mu.Unlock()
}

// rotate closes the current step, and the current minute when minuteDone.
// Called once per step by the registry's rotation.
func (k *slowKeeper) rotate(minuteDone bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cur := k.cur
	k.cur = nil
	k.threshold.Store(0)
	if cur != nil && cur.empty() {
		k.recycle(cur)
		cur = nil
	}
	if cur != nil {
		m := k.coarse[k.coarsePos]
		if m == nil {
			m = k.step()
			k.coarse[k.coarsePos] = m
		}
		m.merge(cur, k.n)
	}
	k.finePos = (k.finePos + 1) % len(k.fine)
	k.recycle(k.fine[k.finePos])
	k.fine[k.finePos] = cur
	if minuteDone {
		k.coarsePos = (k.coarsePos + 1) % len(k.coarse)
		k.recycle(k.coarse[k.coarsePos])
		k.coarse[k.coarsePos] = nil
	}
}

// idle reports whether the keeper holds nothing.
func (k *slowKeeper) idle() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cur != nil && !k.cur.empty() {
		return false
	}
	for _, st := range k.fine {
		if st != nil {
			return false
		}
	}
	for _, st := range k.coarse {
		if st != nil {
			return false
		}
	}
	return true
}

// window returns a copy of window w: its N slowest calls and the
// baseline of all its calls.
func (k *slowKeeper) window(w Window) *slowStep {
	out := &slowStep{calls: make([]slowCall, 0, k.n)}
	k.mu.Lock()
	defer k.mu.Unlock()
	add := func(st *slowStep) {
		if st != nil {
			out.merge(st, k.n)
		}
	}
	add(k.cur)
	if w == Window1m {
		for _, st := range k.fine {
			add(st)
		}
		return out
	}
	n := len(k.coarse)
	for i := range windowMinutes[w] {
		add(k.coarse[(k.coarsePos-i+n)%n])
	}
	return out
}

// SlowKeeperBytes is the most memory one model's slow-call keeper holds
// with n calls kept per step, besides the inputs' strings: its fine
// steps, its minutes and a spare step, each full, every call with a
// trace or batch id and every baseline's sizes spread over more buckets
// than a stepHist holds inline.
func SlowKeeperBytes(n int) int {
	steps := slowStepsPerMinute + 1 + coarseSlots + 1
	return steps * (n*(slowCallBytes+slowExtraBytes) + callBaseBytes + 2*logHistBytes)
}

// slowExtraBytes and logHistBytes are the sizes of what a kept call and a
// baseline may point to.
const (
	slowExtraBytes = int(unsafe.Sizeof(slowExtra{}))
	logHistBytes   = int(unsafe.Sizeof(logHist{}))
)
