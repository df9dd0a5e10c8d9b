package release

import (
	"sync/atomic"
	"time"
)

// MaxClasses bounds the input-size classes a release keeps apart: the
// proxy's class numbers are clamped to 0..MaxClasses-1.
const MaxClasses = 8

// State is where a release stands.
type State uint8

const (
	// Running: judged every tick; it may be promoted or rolled back.
	Running State = iota
	// Paused by an operator: evidence is still gathered, nothing decided.
	Paused
	// Held: its step ran out of time before the evidence to promote it;
	// it may still be rolled back, and waits for an operator to promote
	// or resume it.
	Held
	// RolledBack: the candidate gets nothing (and no shadow copies).
	RolledBack
	// Promoted: the candidate gets every call.
	Promoted
)

var stateNames = [...]string{"running", "paused", "held", "rolled_back", "promoted"}

// String returns the state's name as the API shows it ("rolled_back").
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// MarshalText writes the state's name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *State) UnmarshalText(b []byte) error {
	for i, n := range stateNames {
		if n == string(b) {
			*s = State(i)
			return nil
		}
	}
	return errUnknown("state", string(b))
}

// Release is one model's release: its split, what was observed of its
// calls, and its judgement. The proxy gets it in a Choice and reports
// each call's outcome to it; everything else goes through the Set.
type Release struct {
	// seq numbers the non-sticky calls, shadowSeq the stable calls that
	// may be copied (the low-discrepancy sequences of Choose).
	seq       atomic.Uint64
	_         [56]byte
	shadowSeq atomic.Uint64
	_         [56]byte
	// stats counts the current step's calls; a new step swaps in a new
	// one, so Observe never waits for the judgement.
	stats atomic.Pointer[stepStats]
	// edges are each size class's stable latency quantiles (as buckets)
	// that cut latencies into the share test's bins, set by the
	// judgement from past stable calls only.
	edges [MaxClasses]atomic.Pointer[edges]

	// The rest belongs to the Set's lock.
	spec      Spec
	state     State
	step      int // index into spec.Steps; -1 without steps
	weight    float64
	stepStart time.Time
	history   []Decision
	current   Decision
	evidence  Evidence
	assessed  time.Time // when evidence was computed
	reset     string
	j         judge
}

// stepStats counts one step's calls, by size class and version.
type stepStats struct {
	class  [MaxClasses]atomic.Pointer[classStats]
	failed [2]atomic.Uint64
	// pairs and disagree count compared shadow answers.
	pairs, disagree atomic.Uint64
}

// classStats is one size class of one step: 27 KiB, made at its first
// call.
type classStats struct {
	calls [2]atomic.Uint64 // answered or failed
	hist  [2]hist          // latencies of answered calls
	bins  [2][nBins]atomic.Uint64
}

// edges are bucket numbers: a latency in bucket i falls in bin k, the
// number of edges below i.
type edges [nBins - 1]int32

func (e *edges) bin(i int) int {
	b := 0
	for _, x := range e {
		if int32(i) > x {
			b++
		}
	}
	return b
}

// class returns the step's stats of size class c, made at its first call.
func (st *stepStats) classOf(c int) *classStats {
	cs := st.class[c].Load()
	if cs == nil {
		cs = new(classStats)
		if !st.class[c].CompareAndSwap(nil, cs) {
			cs = st.class[c].Load()
		}
	}
	return cs
}

// Observe records one finished call: the side it went to (Choice.Version;
// a shadow copy is the Candidate's), its input-size class (a small number
// the proxy derives from the input, e.g. log2 of the rows; clamped to
// 0..MaxClasses-1), its latency and whether it succeeded. A failed
// call's latency is not counted (a fast failure is no speed-up). It is
// safe from any goroutine, takes no lock and allocates nothing but a
// class's first counters. A nil Release does nothing.
func (r *Release) Observe(v Version, class int, latency time.Duration, ok bool) {
	if r == nil {
		return
	}
	v &= 1
	st := r.stats.Load()
	c := min(max(class, 0), MaxClasses-1)
	cs := st.classOf(c)
	cs.calls[v].Add(1)
	if !ok {
		st.failed[v].Add(1)
		return
	}
	i := bucketOf(latency)
	cs.hist[v].record(i)
	if e := r.edges[c].Load(); e != nil {
		cs.bins[v][e.bin(i)].Add(1)
	}
}

// ObserveShadow records one compared pair of answers: the shadow's
// answer agreed with the stable one (within the tolerance, or the same
// top class) or not. A nil Release does nothing.
func (r *Release) ObserveShadow(agree bool) {
	if r == nil {
		return
	}
	st := r.stats.Load()
	st.pairs.Add(1)
	if !agree {
		st.disagree.Add(1)
	}
}

// Spec returns the release's spec, defaults filled.
func (r *Release) Spec() Spec { return r.spec }
