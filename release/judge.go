package release

import (
	"math"
	"time"
)

// Kind is what a decision does.
type Kind uint8

const (
	// Hold keeps the weight: not enough evidence yet, or a step out of
	// time, or nothing to advance.
	Hold Kind = iota
	// Promote moves to the next step (or to 100% after the last).
	Promote
	// Rollback sends the candidate nothing, at once.
	Rollback
)

var kindNames = [...]string{"hold", "promote", "rollback"}

// String returns "hold", "promote" or "rollback".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// MarshalText writes the kind's name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return errUnknown("kind", string(b))
}

// Decision is one judgement of a release, with its evidence in words.
type Decision struct {
	Model string    `json:"model"`
	At    time.Time `json:"at"`
	Kind  Kind      `json:"kind"`
	// From and To are the candidate's weights before and after.
	From float64 `json:"from"`
	To   float64 `json:"to"`
	// Manual is set for an operator's decision.
	Manual bool `json:"manual,omitempty"`
	// Needs is, for a hold, about how many more candidate calls the step
	// needs to be promoted; -1 when the evidence points the other way
	// (the estimate itself is past the smallest change that matters).
	Needs int64 `json:"needs,omitempty"`
	// Reason is the evidence in words.
	Reason string `json:"reason"`
}

// judge is the judgement's own state: what the share tests have seen,
// and the shares they will use for the next tick's calls.
type judge struct {
	prev       [MaxClasses]prevClass
	prevFailed [2]uint64
	prevPairs  uint64
	prevDis    uint64
	// share is each class's candidate share for the coming tick, fixed
	// from past calls (0: none yet); errShare the same over all classes.
	share    [MaxClasses]float64
	errShare float64
	// errDone is the part of the calls the error test needs to catch the
	// smallest rise that matters that earlier steps gave it: the test
	// keeps its evidence across steps.
	errDone float64
	body    shareTest
	tail    shareTest
	errs    shareTest
	// pairs and disagree count the release's compared answers (every
	// step: the test is against a fixed rate, so they add up).
	pairs, disagree uint64
}

type prevClass struct {
	Calls [2]uint64        `json:"calls"`
	Bins  [2][nBins]uint64 `json:"bins"`
}

// newJudge returns the judgement of a fresh release.
func newJudge(s Spec) judge {
	body, top := latencyRatios(s.Judgement.TailQuantile)
	return judge{body: newShareTest(body), tail: newShareTest(top), errs: newShareTest(errorRatios())}
}

// Evidence is what the judgement knows of the current step, in numbers.
// Bounds are confidence sequences at Level: they hold at every moment at
// once, however often they are read.
type Evidence struct {
	Level   float64         `json:"level"`
	Classes []ClassEvidence `json:"classes,omitempty"`
	Errors  ErrorEvidence   `json:"errors"`
	// Agreement is set when shadow answers were compared.
	Agreement *AgreementEvidence `json:"agreement,omitempty"`
	// LatencyTest, ErrorTest and AgreementTest are the tests' likelihood
	// ratios against "no worse" (capped at 1e12); a rollback needs one
	// above Bar.
	LatencyTest   float64 `json:"latency_test"`
	ErrorTest     float64 `json:"error_test"`
	AgreementTest float64 `json:"agreement_test,omitempty"`
	Bar           float64 `json:"bar"`
}

// ClassEvidence compares the two versions' latencies in one size class.
type ClassEvidence struct {
	Class int    `json:"class"`
	Name  string `json:"name"`
	// Calls are the stable and candidate answered calls of the step.
	Calls [2]uint64 `json:"calls"`
	P50   Ratio     `json:"p50"`
	Tail  Ratio     `json:"tail"`
	// CallsToCatch is how many candidate calls of the class the latency
	// tests need to catch a candidate slower by the smallest change that
	// matters with the judgement's power (0: no bands to tell yet).
	CallsToCatch uint64 `json:"calls_to_catch,omitempty"`
}

// Ratio is the candidate's latency quantile over the stable one's.
type Ratio struct {
	Quantile  float64       `json:"quantile"`
	Stable    time.Duration `json:"stable"`
	Candidate time.Duration `json:"candidate"`
	Ratio     float64       `json:"ratio"`
	// Low and High bound the ratio; 0 means no bound yet on that side.
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// ErrorEvidence compares the versions' error rates (fractions; Diff and
// its bounds in percentage points).
type ErrorEvidence struct {
	Calls     [2]uint64 `json:"calls"`
	Failed    [2]uint64 `json:"failed"`
	Stable    float64   `json:"stable"`
	Candidate float64   `json:"candidate"`
	Diff      float64   `json:"diff_points"`
	Low       float64   `json:"low_points"`
	High      float64   `json:"high_points"`
	// CallsToCatch is how many candidate calls the error test needs to
	// catch a rise of the smallest change that matters with the
	// judgement's power.
	CallsToCatch uint64 `json:"calls_to_catch,omitempty"`
}

// AgreementEvidence is the share of shadow answers that agreed.
type AgreementEvidence struct {
	Pairs uint64  `json:"pairs"`
	Agree float64 `json:"agree"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	// PairsToCatch is how many compared answers the agreement test needs
	// to catch a shadow disagreeing on twice the share allowed with the
	// judgement's power.
	PairsToCatch uint64 `json:"pairs_to_catch,omitempty"`
}

// priorCalls weighs the expected share against the calls seen when the
// share is estimated, so a step's first calls do not swing it.
const priorCalls = 20

// minEdgeCalls is the least number of stable calls of a class its bins
// are cut from: the tail edge needs a few calls above it.
const minEdgeCalls = 200

// expectedShare is the candidate's share of the calls the release sees
// at weight w (percent) with shadow copies of a fraction f of the rest.
func expectedShare(w, f float64) float64 {
	w /= 100
	cand := w + (1-w)*f
	return cand / (1 + (1-w)*f)
}

// feed brings the share tests up to date with the calls since the last
// tick, then fixes the shares and bin edges for the next tick from the
// calls so far. Shares and edges are set before the calls they judge,
// which is what keeps each factor of the tests fair.
func (r *Release) feed() {
	j := &r.j
	st := r.stats.Load()
	prior := expectedShare(r.weight, r.shadowFraction())
	var all [2]uint64
	for c := range MaxClasses {
		cs := st.class[c].Load()
		if cs == nil {
			continue
		}
		pc := &j.prev[c]
		var cur prevClass
		var dc, ds [nBins]uint64
		for v := range 2 {
			cur.Calls[v] = cs.calls[v].Load()
			all[v] += cur.Calls[v]
			for b := range nBins {
				cur.Bins[v][b] = cs.bins[v][b].Load()
			}
		}
		for b := range nBins {
			dc[b] = cur.Bins[Candidate][b] - pc.Bins[Candidate][b]
			ds[b] = cur.Bins[Stable][b] - pc.Bins[Stable][b]
		}
		if p := j.share[c]; p > 0 {
			// The tail test's ratios are alike below the tail edge, so
			// it takes the same counts.
			j.body.add(p, dc[:], ds[:])
			j.tail.add(p, dc[:], ds[:])
		}
		*pc = cur
		j.share[c] = (float64(cur.Calls[Candidate]) + prior*priorCalls) / (float64(cur.Calls[0]+cur.Calls[1]) + priorCalls)
		if cur.Calls[Stable] >= minEdgeCalls {
			r.edges[c].Store(cutEdges(&cs.hist[Stable], r.spec.Judgement.TailQuantile))
		}
	}
	var f [2]uint64
	for v := range 2 {
		f[v] = st.failed[v].Load()
	}
	if j.errShare > 0 {
		j.errs.add(j.errShare, []uint64{f[Candidate] - j.prevFailed[Candidate]}, []uint64{f[Stable] - j.prevFailed[Stable]})
	}
	j.prevFailed = f
	j.errShare = (float64(all[Candidate]) + prior*priorCalls) / (float64(all[0]+all[1]) + priorCalls)
	pairs, dis := st.pairs.Load(), st.disagree.Load()
	j.pairs += pairs - j.prevPairs
	j.disagree += dis - j.prevDis
	j.prevPairs, j.prevDis = pairs, dis
}

// shadowFraction is the fraction of the stable calls copied to a shadow.
func (r *Release) shadowFraction() float64 {
	if r.spec.Shadow != nil && r.state != RolledBack {
		return r.spec.Shadow.Fraction
	}
	return 0
}

// ceilCalls rounds a number of calls up; 0 when there is none.
func ceilCalls(n float64) uint64 {
	if math.IsInf(n, 0) || math.IsNaN(n) || n > 1e15 {
		return 0
	}
	return uint64(math.Ceil(n))
}

// cutEdges returns the buckets of the stable latencies' quantiles that
// bound the share test's bins.
func cutEdges(h *hist, tail float64) *edges {
	var c counts
	n := h.load(&c)
	e := new(edges)
	for k, q := range binLevels(tail) {
		e[k] = int32(c.rank(max(uint64(q*float64(n)+0.5), 1)))
	}
	return e
}

// newStep starts a step at weight w: fresh counts; the tests and the bin
// edges carry on.
func (r *Release) newStep(w float64, now time.Time) {
	r.weight = w
	r.stepStart = now
	r.assessed = time.Time{} // the last step's evidence says nothing of this one
	r.stats.Store(new(stepStats))
	r.j.prev = [MaxClasses]prevClass{}
	r.j.prevFailed = [2]uint64{}
	r.j.prevPairs, r.j.prevDis = 0, 0
	r.j.share = [MaxClasses]float64{}
	r.j.errShare = 0
}

// tests is how many rollback tests share alpha.
func (r *Release) tests() int {
	if r.spec.Shadow != nil {
		return 3
	}
	return 2
}

// bar is the log of the evidence a rollback test needs.
func (r *Release) bar() float64 { return math.Log(float64(r.tests()) / r.spec.Judgement.Alpha) }

// assess computes the evidence of the current step from its counts.
func (r *Release) assess(sc *counts2, className func(int) string) Evidence {
	j := r.spec.Judgement
	alpha := j.Alpha
	ev := Evidence{Level: 1 - alpha, Bar: math.Exp(r.bar())}
	ev.LatencyTest = capEvidence(logMeanExp([]float64{r.j.body.logValue(), r.j.tail.logValue()}))
	ev.ErrorTest = capEvidence(r.j.errs.logValue())
	st := r.stats.Load()
	bar, z := r.bar(), zOf(j.Power)
	prior := expectedShare(r.weight, r.shadowFraction())
	for c := range MaxClasses {
		cs := st.class[c].Load()
		if cs == nil {
			continue
		}
		ce := ClassEvidence{Class: c, Name: className(c)}
		for v := range 2 {
			ce.Calls[v] = cs.hist[v].load(&sc[v])
			ev.Errors.Calls[v] += cs.calls[v].Load()
		}
		if ce.Calls[Candidate] == 0 || ce.Calls[Stable] == 0 {
			continue
		}
		ce.P50 = ratio(sc, ce.Calls, 0.5, alpha)
		ce.Tail = ratio(sc, ce.Calls, j.TailQuantile, alpha)
		share := r.j.share[c]
		if share == 0 {
			share = prior
		}
		ce.CallsToCatch = ceilCalls(latencyPowerCalls(&sc[Stable], r.edges[c].Load(), 1+j.MinChange.Tail/100, j.TailQuantile, share, bar, z))
		ev.Classes = append(ev.Classes, ce)
	}
	e := &ev.Errors
	var lo, hi [2]float64
	for v := range 2 {
		e.Failed[v] = st.failed[v].Load()
		if e.Calls[v] > 0 {
			rates := float64(e.Failed[v]) / float64(e.Calls[v])
			if v == int(Stable) {
				e.Stable = rates
			} else {
				e.Candidate = rates
			}
		}
		lo[v], hi[v] = propBounds(e.Failed[v], e.Calls[v], alpha)
	}
	e.Diff = 100 * (e.Candidate - e.Stable)
	e.Low = 100 * (lo[Candidate] - hi[Stable])
	e.High = 100 * (hi[Candidate] - lo[Stable])
	if e.Calls[Stable] > 0 {
		share := r.j.errShare
		if share == 0 {
			share = prior
		}
		// The stable rate, at least half a failure of its calls: a rate
		// of 0 would make any failure of the candidate conclusive.
		f := max(e.Stable, 0.5/float64(e.Calls[Stable]))
		e.CallsToCatch = ceilCalls(errorPowerCalls(f, j.MinChange.Errors/100, share, bar, z))
	}
	if r.j.pairs > 0 {
		lo, hi := propBounds(r.j.disagree, r.j.pairs, 2*alpha/float64(r.tests()))
		a := &AgreementEvidence{Pairs: r.j.pairs, Agree: 1 - float64(r.j.disagree)/float64(r.j.pairs), Low: 1 - hi, High: 1 - lo}
		ev.Agreement = a
		f0 := j.MinChange.Agreement / 100
		a.PairsToCatch = ceilCalls(agreementPowerCalls(f0, bar, z))
		ev.AgreementTest = capEvidence(propLogLR(float64(r.j.disagree), float64(r.j.pairs), f0, false))
	}
	return ev
}

// counts2 is scratch space for one class's two histograms.
type counts2 [2]counts

func capEvidence(logv float64) float64 { return math.Exp(min(logv, math.Log(1e12))) }

// ratio compares the q-quantiles of the candidate and the stable
// latencies; each quantile's bounds hold with probability 1-alpha/2.
func ratio(sc *counts2, n [2]uint64, q, alpha float64) Ratio {
	r := Ratio{Quantile: q, Stable: sc[Stable].quantile(q, n[Stable]), Candidate: sc[Candidate].quantile(q, n[Candidate])}
	if r.Stable > 0 {
		r.Ratio = float64(r.Candidate) / float64(r.Stable)
	}
	slo, shi := sc[Stable].quantileBounds(q, n[Stable], alpha/2)
	clo, chi := sc[Candidate].quantileBounds(q, n[Candidate], alpha/2)
	if shi > 0 && clo > 0 {
		r.Low = float64(clo) / float64(shi)
	}
	if slo > 0 && chi > 0 {
		r.High = float64(chi) / float64(slo)
	}
	return r
}
