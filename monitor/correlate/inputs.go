package correlate

import (
	"maps"
	"math"

	"github.com/infergate/infergate/monitor"
)

// InputSource gives the running input counts of the series;
// *monitor.Registry is one.
type InputSource interface {
	InputCounts(group func(monitor.SeriesKey) string, fn func(key monitor.SeriesKey, g string, c *monitor.InputCounts))
}

// Learning the inputs.
const (
	// InputHalfLife is the half-life, in steps, of the learned input
	// distribution: 30 minutes at the default interval. A change of
	// inputs that does not raise latency becomes the normal within about
	// an hour; steps while latency is up are not learned at all.
	InputHalfLife = 1800
	// MinInputSteps is how many calm steps with calls the input baseline
	// needs before it is known (a minute, as the latency baseline's
	// recent level).
	MinInputSteps = 60
	// MinInputCalls is the least number of calls, both learned and in
	// the recent window, for an input verdict: with fewer the binomial
	// test could decide from a handful of calls.
	MinInputCalls = 20
	// InputGrowth is the factor the hints claim: the recent p90 of
	// request bytes (or rows) is at least this times the baseline's.
	InputGrowth = 2.0
)

// inputDecay is the per-step weight of what was learned before.
var inputDecay = math.Exp2(-1.0 / InputHalfLife)

// inputCounts are one model's calls of one step by request bytes
// (monitor.InputByteBuckets buckets) then by rows.
type inputCounts [monitor.InputByteBuckets + monitor.InputRowBuckets]uint64

// inputDeltas reads every inference series' input counts and returns,
// per model, the calls counted since the last step. A series whose counts
// went down was dropped and created again: all of its counts are new.
// The first read only primes (the counts since start are no step's).
func (c *Correlator) inputDeltas() map[string]*inputCounts {
	if c.opts.Inputs == nil {
		return nil
	}
	out := map[string]*inputCounts{}
	if c.lastInputs == nil {
		c.lastInputs = map[monitor.SeriesKey]*lastInputs{}
	}
	c.inputStep++
	step := c.inputStep
	c.opts.Inputs.InputCounts(c.group, func(k monitor.SeriesKey, g string, cur *monitor.InputCounts) {
		last := c.lastInputs[k]
		if last == nil {
			last = &lastInputs{}
			c.lastInputs[k] = last
		}
		var prev monitor.InputCounts
		if last.step == step-1 { // read at the last step
			prev = last.counts
		}
		last.counts, last.step = *cur, step
		if !c.primed {
			return
		}
		for i := range cur.Bytes {
			if cur.Bytes[i] < prev.Bytes[i] {
				prev = monitor.InputCounts{}
				break
			}
		}
		d := out[g]
		if d == nil {
			d = &inputCounts{}
			out[g] = d
		}
		for i := range cur.Bytes {
			d[i] += cur.Bytes[i] - prev.Bytes[i]
		}
		for i := range cur.Rows {
			// Rows counts never fall while Bytes' do not: one call
			// adds one to each.
			d[monitor.InputByteBuckets+i] += cur.Rows[i] - min(prev.Rows[i], cur.Rows[i])
		}
	})
	maps.DeleteFunc(c.lastInputs, func(_ monitor.SeriesKey, l *lastInputs) bool { return l.step != step }) // series gone
	c.primed = true
	return out
}

// inputTrack is one model's input distribution: the per-step counts of
// the last RecentSlices steps and the learned (decayed) baseline.
type inputTrack struct {
	// recent are the last steps' counts, a ring made at its full length
	// on first use: one step's calls fit in 32 bits, and a thousand
	// models each kept a ring grown by doubling from 448-byte entries.
	recent []stepInputs
	pos    int
	base   [len(inputCounts{})]float64
	steps  int // calm steps learned
}

// stepInputs is one step's counts, saturating at 2^32-1.
type stepInputs [len(inputCounts{})]uint32

// push adds one step's counts to the recent ring of n steps.
func (t *inputTrack) push(d *inputCounts, n int) {
	var st stepInputs
	for i, c := range d {
		st[i] = uint32(min(c, math.MaxUint32))
	}
	if len(t.recent) < n {
		if t.recent == nil {
			t.recent = make([]stepInputs, 0, n)
		}
		t.recent = append(t.recent, st)
		return
	}
	t.recent[t.pos] = st
	t.pos = (t.pos + 1) % len(t.recent)
}

// learn decays the baseline and adds one calm step's counts.
func (t *inputTrack) learn(d *inputCounts) {
	var n uint64
	for i := range d[:monitor.InputByteBuckets] {
		n += d[i]
	}
	if n == 0 {
		return
	}
	for i := range t.base {
		t.base[i] = t.base[i]*inputDecay + float64(d[i])
	}
	t.steps++
}

// InputDist is one quantity's (request bytes or rows) p90 now and in the
// baseline, to a power of two: each is the top of its bucket, so
// "4096" reads "at most 4 KiB".
type InputDist struct {
	// Calls is how many recent calls the quantity is known for.
	Calls uint64
	// P90 and BaselineP90 are the tops of the buckets the quantile falls
	// in; 0 when unknown.
	P90, BaselineP90 int64
	// Grew is true when the recent p90 is, with confidence
	// (monitor.Confidence), at least InputGrowth times the baseline's;
	// Shrank when it is at most 1/InputGrowth of it.
	Grew, Shrank bool

	recent []uint64 // the recent calls by bucket (rows: unknown left out)
	base   int      // the baseline p90's bucket, -1 when unknown
	judged bool     // baseline known and enough recent calls
}

// Above reports whether the recent p90 is, with confidence, at least
// factor (> 1) times the baseline's. Buckets are powers of two, so the
// claim is of the next power of two at or above factor: a factor of 3
// needs the p90 to have grown ×4. ok is false when the calls or the
// baseline cannot tell.
func (d InputDist) Above(factor float64) (above, ok bool) {
	if !d.judged {
		return false, false
	}
	return grewBy(d.recent, d.Calls, d.base, factor), true
}

// InputState is what a model's recent calls carried against what they
// usually carry.
type InputState struct {
	// Known is true once the baseline has learned MinInputSteps calm
	// steps and MinInputCalls calls; Decided when the recent window also
	// had MinInputCalls calls.
	Known, Decided bool
	Bytes, Rows    InputDist
}

// Moved reports the input hint the state supports: HintInputsGrew,
// HintInputShapeChanged or "".
func (s InputState) Moved() string {
	switch {
	case !s.Decided:
		return ""
	case s.Bytes.Grew || (s.Rows.Grew && !s.Bytes.Shrank):
		return HintInputsGrew
	case !s.Bytes.Shrank && s.Rows.Shrank:
		// Same bytes in fewer rows: each row is bigger (longer
		// sequences, larger images); the shape changed.
		return HintInputShapeChanged
	}
	return ""
}

// bucketTop is the top of bucket i, the value a p90 in it is reported as.
func bucketTop(i int) int64 {
	if i <= 0 {
		return 0
	}
	return 1<<i - 1
}

// quantileBucket returns the bucket where quantile q of counts falls, or
// -1 when counts are empty.
func quantileBucket(counts []float64, q float64) int {
	var total float64
	for _, c := range counts {
		total += c
	}
	if total <= 0 {
		return -1
	}
	var cum float64
	for i, c := range counts {
		cum += c
		if cum >= q*total*(1-1e-12) {
			return i
		}
	}
	return len(counts) - 1
}

// steps is how many powers of two a factor spans, rounded up: a claim of
// "at least 2^steps times" is a claim of "at least factor times".
func factorSteps(factor float64) int {
	return max(1, int(math.Ceil(math.Log2(factor)-1e-9)))
}

// grewBy reports whether the recent counts' p90 is, with confidence
// monitor.Confidence, at least factor times the p90 of the baseline
// whose p90 falls in bucket b. Values in bucket b are below 2^b, values
// from bucket b+1+s on at least 2^(b+s): the claim holds when enough
// recent calls lie there that the binomial test (monitor.LowerBoundRank)
// puts the p90's lower bound among them.
func grewBy(recent []uint64, n uint64, b int, factor float64) bool {
	r, ok := monitor.LowerBoundRank(n, 0.9)
	if !ok || b < 0 {
		return false
	}
	t := b + 1 + factorSteps(factor)
	var above uint64
	for i := t; i < len(recent); i++ {
		above += recent[i]
	}
	return t < len(recent) && above >= n-r+1
}

// shrankBy is grewBy the other way: the recent p90 is, with confidence,
// at most 1/factor of the baseline's (bucket b, values at least
// 2^(b-1)); calls in buckets 1..b-1-s are below 2^(b-1-s). The upper
// bound of a p90 is the mirror of a p10's lower bound.
func shrankBy(recent []uint64, n uint64, b int, factor float64) bool {
	r, ok := monitor.LowerBoundRank(n, 0.1)
	t := b - 1 - factorSteps(factor)
	if !ok || t < 1 {
		return false
	}
	var below uint64
	for i := 1; i <= t; i++ {
		below += recent[i]
	}
	return below >= n-r+1
}

// state judges the recent window against the baseline.
func (t *inputTrack) state() InputState {
	var rec inputCounts
	for i := range t.recent {
		for j, c := range t.recent[i] {
			rec[j] += uint64(c)
		}
	}
	return judgeInputs(&rec, &t.base, t.steps)
}

// JudgeInputs is what the correlator concludes from a recent window's
// counts against a baseline learned from steps calm steps of learned
// counts: for readers that hold counts of their own (tests, replays).
func JudgeInputs(recent, learned *monitor.InputCounts, steps int) InputState {
	var rec inputCounts
	var base [len(inputCounts{})]float64
	copy(rec[:], recent.Bytes[:])
	copy(rec[monitor.InputByteBuckets:], recent.Rows[:])
	for i, c := range learned.Bytes {
		base[i] = float64(c)
	}
	for i, c := range learned.Rows {
		base[monitor.InputByteBuckets+i] = float64(c)
	}
	return judgeInputs(&rec, &base, steps)
}

func judgeInputs(rec *inputCounts, learnedBase *[len(inputCounts{})]float64, steps int) InputState {
	bytes, rows := rec[:monitor.InputByteBuckets], rec[monitor.InputByteBuckets:]
	baseBytes, baseRows := learnedBase[:monitor.InputByteBuckets], learnedBase[monitor.InputByteBuckets:]
	var s InputState
	var learned float64
	for _, c := range baseBytes {
		learned += c
	}
	s.Known = steps >= MinInputSteps && learned >= MinInputCalls
	dist := func(recent []uint64, base []float64, from int) InputDist {
		// Rows from 1: rows 0 are calls whose rows are unknown.
		d := InputDist{recent: make([]uint64, len(recent)), base: -1}
		copy(d.recent[from:], recent[from:])
		// On the stack: every model is judged every step.
		var frBuf, fbBuf [max(monitor.InputByteBuckets, monitor.InputRowBuckets)]float64
		fr := frBuf[:len(recent)]
		for i, c := range d.recent {
			d.Calls += c
			fr[i] = float64(c)
		}
		fb := fbBuf[:len(base)]
		copy(fb[from:], base[from:])
		if d.Calls > 0 {
			d.P90 = bucketTop(quantileBucket(fr, 0.9))
		}
		d.base = quantileBucket(fb, 0.9)
		d.BaselineP90 = bucketTop(d.base)
		if s.Known && d.Calls >= MinInputCalls && d.base >= 0 {
			d.judged = true
			d.Grew = grewBy(d.recent, d.Calls, d.base, InputGrowth)
			d.Shrank = shrankBy(d.recent, d.Calls, d.base, InputGrowth)
		}
		return d
	}
	s.Bytes = dist(bytes, baseBytes, 0)
	s.Rows = dist(rows, baseRows, 1)
	s.Decided = s.Known && s.Bytes.Calls >= MinInputCalls
	return s
}
