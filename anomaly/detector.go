package anomaly

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Threshold is the score from which a second is anomalous enough to page,
// for every model alike: the score is calibrated against the model's own
// recent scores (see the package doc). The alert rule adds its `for`.
const Threshold = 0.9

// Result is what the detector says of one second.
type Result struct {
	// Score is in [0, 1]: about 0.5 for a usual second, above Threshold
	// for an anomalous one. 0 while Learning.
	Score float64
	// Learning is true until the detector has seen enough normal seconds
	// to score (3/4 of its window). A learning detector never pages.
	Learning bool
	// Learned says the second was added to what the detector knows as
	// normal: the caller allowed it and its score was below the
	// WithLearnBelow bound.
	Learned bool
	// Contributions holds, per feature in the detector's order, how much
	// of the second's surprise the feature's splits carry beyond their
	// usual share, in bits (≥ 0; 0 for a missing feature and while
	// Learning). The slice belongs to the detector and is overwritten by
	// the next Observe: copy it to keep it.
	Contributions []float64
	// Top lists the indexes of the features that made the score, largest
	// contribution first, at most three; empty while Learning or when no
	// feature stands out.
	Top []int
	// Explanation says in words what the top features did, for a second
	// scored at or above the WithExplainAbove bound; empty otherwise.
	Explanation string
	// Pattern names the explanation's shape (see Detector.Pattern), set
	// with Explanation.
	Pattern string
}

// Detector is a streaming anomaly detector for one model. It is not safe
// for concurrent use: one goroutine feeds a model's seconds in order.
type Detector struct {
	feats []Feature
	o     options
	d     int
	nodes int // per tree: 2^(depth+1) − 1

	dims []uint8   // per tree and depth: the feature split at that depth
	wsLo []float64 // per tree and feature: the workspace the splits halve
	wsHi []float64
	mass []uint16 // per tree and node: learnt seconds in the node

	ring     []float32 // learnt seconds, window × d, raw deviations
	ringN    int
	ringPos  int
	since    int // learnt seconds since the last recount
	recounts int
	built    bool

	center []float64 // per feature: median of the learnt seconds
	scale  []float64 // per feature: robust spread, floored by MinScale

	scores   []float32 // raw scores of learnt seconds, before they were counted
	scoreN   int
	scorePos int
	med      float64 // of scores
	spread   float64
	ready    bool

	cmu  []float64 // per feature: usual contribution of learnt seconds (EWMA)
	cdev []float64 // per feature: its usual absolute deviation (EWMA)
	cN   int

	sm       float64 // the raw score, smoothed over seconds
	smoothed bool

	// scratch, reused by every Observe
	x, u, z, contrib, excess, lo, hi []float64
	top                              [3]int
	sortBuf                          []float32
	last                             Result
}

// New returns a detector over the given features (see Feature and
// DefaultFeatures). It fails on an empty, too long or inconsistent list.
func New(features []Feature, opts ...Option) (*Detector, error) {
	feats, err := checkFeatures(features)
	if err != nil {
		return nil, err
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt.apply(&o)
	}
	return newDetector(feats, o), nil
}

func newDetector(feats []Feature, o options) *Detector {
	d := len(feats)
	nodes := 1<<(o.depth+1) - 1
	det := &Detector{
		feats:   feats,
		o:       o,
		d:       d,
		nodes:   nodes,
		dims:    make([]uint8, o.trees*o.depth),
		wsLo:    make([]float64, o.trees*d),
		wsHi:    make([]float64, o.trees*d),
		mass:    make([]uint16, o.trees*nodes),
		ring:    make([]float32, o.window*d),
		scores:  make([]float32, o.window),
		sortBuf: make([]float32, o.window),
	}
	f64 := make([]float64, 11*d) // one block for the per-feature slices
	det.x = f64[10*d : 11*d : 11*d]
	det.center, det.scale, det.cmu, det.cdev = f64[0:d:d], f64[d:2*d:2*d], f64[2*d:3*d:3*d], f64[3*d:4*d:4*d]
	det.u, det.z, det.contrib, det.excess = f64[4*d:5*d:5*d], f64[5*d:6*d:6*d], f64[6*d:7*d:7*d], f64[7*d:8*d:8*d]
	det.lo, det.hi = f64[8*d:9*d:9*d], f64[9*d:10*d:10*d]

	rng := rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15))
	// Each tree splits k features, chosen from a shuffled deck so that
	// every feature is in about as many trees; depth j splits the
	// tree's (j mod k)th feature, so a path cuts each of them 2 or 3
	// times (see the package doc on resolution).
	k := min(d, 3)
	deck := rng.Perm(d)
	pos := 0
	sub := make([]int, 0, k)
	for t := range o.trees {
		sub = sub[:0]
		for len(sub) < k {
			if pos == len(deck) {
				deck, pos = rng.Perm(d), 0
			}
			if f := deck[pos]; !slices.Contains(sub, f) {
				sub = append(sub, f)
			}
			pos++
		}
		for j := range o.depth {
			det.dims[t*o.depth+j] = uint8(sub[j%k])
		}
		// The workspace a tree halves: the feature's range, each end
		// pushed out by up to one unit at random, so that the splits fall
		// at different places in every tree. Half-Space Trees take a
		// random point s of the range and 2·max(s−lo, hi−s) either side;
		// on standardised coordinates that wastes the few splits a path
		// has on a feature, while this puts the first near 2σ (one-sided)
		// or 0 (both sides) and the next near 4σ or ±2σ, where usual and
		// unusual seconds part.
		for f := range d {
			lo, hi := 0.0, float64(maxU)
			if feats[f].Side == Both {
				lo = -maxU
			}
			det.wsLo[t*d+f] = lo - rng.Float64()
			det.wsHi[t*d+f] = hi + rng.Float64()
		}
	}
	det.since = int(o.seed % uint64(det.every()))
	return det
}

// maxU bounds the transformed deviation: log2(1 + 15σ).
const maxU = 4

// every is the number of learnt seconds between recounts.
func (det *Detector) every() int { return det.o.window / 4 }

// Features returns the detector's features, labels and floors filled in.
func (det *Detector) Features() []Feature { return slices.Clone(det.feats) }

// Learning reports whether the detector still learns before it scores.
func (det *Detector) Learning() bool { return !det.ready }

// Observe takes one second of the model: x holds one deviation per
// feature, in the order given to New (NaN for a feature with no value
// this second, e.g. no GPU source). learn says the caller allows the
// second to be learnt as normal: false for a second inside an incident
// (an alert firing, a deploy, a drain). It scores the second, then learns
// it if allowed and its score is below the WithLearnBelow bound. It
// panics if len(x) differs from the number of features.
//
// Observe does not allocate, except to write the explanation of a
// second scored at or above the WithExplainAbove bound.
func (det *Detector) Observe(x []float64, learn bool) Result {
	if len(x) != det.d {
		panic("anomaly: Observe with a vector of the wrong length")
	}
	clear(det.excess)
	det.last = Result{Learning: true, Contributions: det.excess, Top: det.top[:0]}
	if !det.built {
		if learn {
			det.remember(x)
			det.last.Learned = true
			if det.ringN >= det.o.window/2 {
				det.recount()
			}
		}
		return det.last
	}
	copy(det.x, x)
	// The score reads the surprise smoothed over the last seconds
	// (α = smooth): a shift that lasts builds up within 2-3 s, while a
	// one-second burst of noise counts for less.
	inst := det.walk(x)
	if !det.smoothed {
		det.sm, det.smoothed = inst, true
	}
	det.sm += smooth * (inst - det.sm)
	raw := det.sm
	score := 0.0
	if det.ready {
		score = det.calibrate(raw)
	}
	det.last.Score = score
	det.last.Learning = !det.ready
	if det.ready {
		det.attribute()
	}
	if learn && (!det.ready || score < det.o.learnBelow) {
		det.learnScored(x, raw)
		det.last.Learned = true
	}
	if det.ready && score >= det.o.explainAbove {
		det.last.Pattern, det.last.Explanation = det.explain()
	}
	return det.last
}

// Last returns the result of the latest Observe (its Contributions are
// overwritten by the next one).
func (det *Detector) Last() Result { return det.last }

// transform turns raw deviations into the trees' coordinates: u, the
// standardised deviation on the anomalous side(s), log-compressed, and z,
// the signed standardised deviation (for the words).
func (det *Detector) transform(x []float64, u, z []float64) {
	for f, v := range x {
		if math.IsNaN(v) {
			u[f], z[f] = 0, 0
			continue
		}
		zz := (v - det.center[f]) / det.scale[f]
		z[f] = zz
		switch det.feats[f].Side {
		case Up:
			zz = max(zz, 0)
		case Down:
			zz = max(-zz, 0)
		}
		a := min(math.Log2(1+math.Abs(zz)), maxU)
		if zz < 0 {
			a = -a
		}
		u[f] = a
	}
}

// walk scores x against the counted trees: per tree, the point descends
// until it enters a node with no learnt second (or reaches a leaf); every
// split on the way adds −log2(share of the parent's mass on the point's
// side) − 1 bits to the split feature: 0 for a fair halving, more when
// the split cuts the point away from most learnt seconds, less when it
// keeps it with them. Their sum is minus the log of the Half-Space Trees
// mass profile score (mass × 2^depth), so the features' contributions add
// up to the score. It returns the mean over trees.
func (det *Detector) walk(x []float64) float64 {
	det.transform(x, det.u, det.z)
	clear(det.contrib)
	depth, d := det.o.depth, det.d
	for t := range det.o.trees {
		dims := det.dims[t*depth : (t+1)*depth]
		for _, f := range dims {
			det.lo[f], det.hi[f] = det.wsLo[t*d+int(f)], det.wsHi[t*d+int(f)]
		}
		mass := det.mass[t*det.nodes : (t+1)*det.nodes]
		i := 0
		for _, f := range dims {
			mid := (det.lo[f] + det.hi[f]) / 2
			c := 2*i + 1
			if det.u[f] < mid {
				det.hi[f] = mid
			} else {
				det.lo[f] = mid
				c++
			}
			mp, mc := mass[i], mass[c]
			det.contrib[f] += lg1[mp] - lgh[mc] - 1
			if mc == 0 {
				break
			}
			i = c
		}
	}
	sum := 0.0
	inv := 1 / float64(det.o.trees)
	for f := range det.contrib {
		det.contrib[f] *= inv
		sum += det.contrib[f]
	}
	return sum
}

// lg1[m] = log2(m+1), lgh[m] = log2(m+½): the smoothed masses of a parent
// and a child (a child with no mass still gets half a second).
var lg1, lgh = func() (a, b [maxWindow + 1]float64) {
	for m := range a {
		a[m] = math.Log2(float64(m) + 1)
		b[m] = math.Log2(float64(m) + 0.5)
	}
	return
}()

// maxWindow bounds WithWindow, and so every node's mass.
const maxWindow = 4096

// calibrate maps a raw score to [0, 1] by the detector's own scores of
// learnt seconds: z = (raw − their median) / (1.4826 × their MAD), score
// = 1 / (1 + e^(−z/zScale)). A usual second is near 0.5; Threshold (0.9)
// is z = zScale × ln 9.
func (det *Detector) calibrate(raw float64) float64 {
	z := (raw - det.med) / det.spread
	return 1 / (1 + math.Exp(-z/zScale))
}

// smooth is the weight of the latest second in the smoothed raw score.
const smooth = 0.4

// zScale sets the steepness of the score: Threshold is z ≈ 6.6.
const zScale = 2.5

// attribute fills the excess contributions and the top features.
func (det *Detector) attribute() {
	total := 0.0
	for f := range det.contrib {
		e := 0.0
		if !math.IsNaN(det.z[f]) && det.u[f] != 0 {
			e = max(det.contrib[f]-det.cmu[f]-det.cdev[f], 0)
		}
		det.excess[f] = e
		total += e
	}
	n := 0
	for range det.top {
		best := -1
		for f, e := range det.excess {
			if e <= 0.15*total || e < 0.05 || slices.Contains(det.top[:n], f) {
				continue
			}
			if best < 0 || e > det.excess[best] {
				best = f
			}
		}
		if best < 0 {
			break
		}
		det.top[n] = best
		n++
	}
	det.last.Top = det.top[:n]
}

// remember adds x to the ring of learnt seconds.
func (det *Detector) remember(x []float64) {
	row := det.ring[det.ringPos*det.d : (det.ringPos+1)*det.d]
	for f, v := range x {
		row[f] = float32(v)
	}
	det.ringPos = (det.ringPos + 1) % det.o.window
	det.ringN = min(det.ringN+1, det.o.window)
}

// learnScored learns a second that was scored against the current
// counts: its raw score calibrates, its contributions set the features'
// usual share, and every window/4 learnt seconds the trees are recounted.
func (det *Detector) learnScored(x []float64, raw float64) {
	det.remember(x)
	det.scores[det.scorePos] = float32(raw)
	det.scorePos = (det.scorePos + 1) % len(det.scores)
	det.scoreN = min(det.scoreN+1, len(det.scores))
	alpha := 1 / float64(det.every())
	if det.cN < det.every() {
		det.cN++
		alpha = 1 / float64(det.cN)
	}
	for f, c := range det.contrib {
		dv := c - det.cmu[f]
		det.cmu[f] += alpha * dv
		det.cdev[f] += alpha * (math.Abs(dv) - det.cdev[f])
	}
	det.since++
	if det.since >= det.every() {
		det.recount()
	}
}

// recount re-estimates every feature's centre and spread from the learnt
// seconds, counts them into the trees afresh, and re-reads the
// calibration from the scores of learnt seconds. Its cost, about a
// window × trees × depth steps, is spread over window/4 seconds.
func (det *Detector) recount() {
	det.since = 0
	n := det.ringN
	det.recounts++
	// The centres and spreads (two sorts per feature, the bulk of a
	// recount) are re-read once a window, the counts every quarter.
	for f := range det.d {
		if det.recounts%4 != 1 {
			break
		}
		buf := det.sortBuf[:0]
		for i := range n {
			if v := det.ring[i*det.d+f]; v == v {
				buf = append(buf, v)
			}
		}
		c, s := medianMAD(buf)
		det.center[f] = c
		det.scale[f] = max(s, det.feats[f].MinScale)
	}
	clear(det.mass)
	x := det.lo // scratch: walk does not run during a recount
	depth, d := det.o.depth, det.d
	for i := range n {
		for f := range d {
			x[f] = float64(det.ring[i*d+f])
		}
		det.transform(x, det.u, det.z)
		for t := range det.o.trees {
			dims := det.dims[t*depth : (t+1)*depth]
			mass := det.mass[t*det.nodes : (t+1)*det.nodes]
			lo, hi := det.contrib, det.excess // scratch too
			for _, f := range dims {
				lo[f], hi[f] = det.wsLo[t*d+int(f)], det.wsHi[t*d+int(f)]
			}
			node := 0
			mass[0]++
			for _, f := range dims {
				mid := (lo[f] + hi[f]) / 2
				node = 2*node + 1
				if det.u[f] < mid {
					hi[f] = mid
				} else {
					lo[f] = mid
					node++
				}
				mass[node]++
			}
		}
	}
	clear(det.contrib)
	clear(det.excess)
	det.built = true
	if det.scoreN >= det.every() {
		buf := append(det.sortBuf[:0], det.scores[:det.scoreN]...)
		det.med, det.spread = medianMAD(buf)
		det.spread = max(det.spread, 0.05)
		det.ready = true
	}
}

// medianMAD returns the median of v and 1.4826 × the median absolute
// deviation from it, sorting v in place (0, 0 for none).
func medianMAD(v []float32) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	m := mid(v)
	for i, a := range v {
		v[i] = float32(math.Abs(float64(a) - m))
	}
	slices.Sort(v)
	return m, 1.4826 * mid(v)
}

func mid(v []float32) float64 {
	n := len(v)
	if n%2 == 1 {
		return float64(v[n/2])
	}
	return (float64(v[n/2-1]) + float64(v[n/2])) / 2
}
