package release

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// How often a release's full evidence (the quantile and rate bounds) is
// recomputed: it costs about 0.2 ms, so a step that may be promoted is
// looked at every few seconds (a promotion that much later costs
// nothing), and otherwise for Status only. A rollback test above its
// bar recomputes it at once.
const (
	assessPromote = 5 * time.Second
	assessEvery   = 10 * time.Second
)

// judgeOne runs one tick of r at now and returns the decision that
// changed it, if any (called with the Set's lock held).
func (s *Set) judgeOne(r *Release, now time.Time) *Decision {
	if r.state == RolledBack || r.state == Promoted {
		return nil
	}
	r.feed()
	j := r.spec.Judgement
	bar := r.bar()
	latE := logMeanExp([]float64{r.j.body.logValue(), r.j.tail.logValue()})
	errE := r.j.errs.logValue()
	agrE := math.Inf(-1)
	if r.j.pairs > 0 {
		agrE = propLogLR(float64(r.j.disagree), float64(r.j.pairs), j.MinChange.Agreement/100, false)
	}
	suspect := latE >= bar || errE >= bar || agrE >= bar
	cand := r.candidateCalls()
	mayPromote := r.state == Running && len(r.spec.Steps) > 0 && cand >= uint64(j.MinCalls)
	if mayPromote && now.Sub(r.assessed) >= assessPromote || now.Sub(r.assessed) >= assessEvery {
		r.evidence = r.assess(&s.scratch, s.className)
		r.assessed = now
	}
	if r.state == Paused {
		r.current = Decision{Model: r.spec.Model, At: now, Kind: Hold, From: r.weight, To: r.weight, Reason: "paused by an operator"}
		return nil
	}
	if suspect && !r.assessed.Equal(now) {
		r.evidence = r.assess(&s.scratch, s.className)
		r.assessed = now
	}
	if suspect {
		if why := r.regression(latE >= bar, errE >= bar, agrE >= bar); why != "" {
			return r.rollback(now, why, false)
		}
	}
	ok, needs, why := r.promotable(cand, suspect)
	if len(r.spec.Steps) == 0 {
		why = "a fixed split (no steps to advance): " + why
		if ok {
			why = "passes every check; a fixed split (no steps) is promoted by an operator"
		}
		r.current = Decision{Model: r.spec.Model, At: now, Kind: Hold, From: r.weight, To: r.weight, Needs: needs, Reason: why}
		return nil
	}
	if r.state == Running && ok {
		return r.promote(now, why, false)
	}
	d := Decision{Model: r.spec.Model, At: now, Kind: Hold, From: r.weight, To: r.weight, Needs: needs,
		Reason: "holding at " + percent(r.weight) + ": " + why}
	if r.state == Running && now.Sub(r.stepStart) >= j.StepTimeLimit {
		r.state = Held
		d.Reason = fmt.Sprintf("held at %s: the step's time limit (%s) passed without the evidence to promote it; %s; waiting for an operator",
			percent(r.weight), j.StepTimeLimit, why)
		r.current = d
		r.record(d)
		return &d
	}
	if r.state == Held {
		d.Reason = "held at " + percent(r.weight) + " for an operator: " + why
	}
	r.current = d
	return nil
}

// candidateCalls counts the step's candidate calls.
func (r *Release) candidateCalls() uint64 {
	var n uint64
	st := r.stats.Load()
	for c := range MaxClasses {
		if cs := st.class[c].Load(); cs != nil {
			n += cs.calls[Candidate].Load()
		}
	}
	return n
}

// minGateCalls is the least number of candidate calls of a class whose
// ratio may confirm a latency rollback.
const minGateCalls = 20

// regression returns why the candidate must be rolled back, or "": a
// test's evidence is above the bar and the estimated change is one that
// matters.
func (r *Release) regression(lat, errs, agr bool) string {
	ev := r.evidence
	j := r.spec.Judgement
	stable, cand := r.spec.Stable.String(), r.spec.Candidate.String()
	if lat {
		limit := 1 + j.MinChange.Tail/100
		var best *ClassEvidence
		var q Ratio
		for i := range ev.Classes {
			c := &ev.Classes[i]
			if c.Calls[Candidate] < minGateCalls || (best != nil && c.Calls[Candidate] <= best.Calls[Candidate]) {
				continue
			}
			rq := c.P50
			if c.Tail.Ratio > rq.Ratio {
				rq = c.Tail
			}
			if rq.Ratio > limit {
				best, q = c, rq
			}
		}
		if best != nil {
			return fmt.Sprintf("%s's %s is %.2fx %s's for inputs of %s (%s confidence sequence %s, %s candidate and %s stable calls; evidence %s:1 against no slowdown)",
				cand, quantileName(q.Quantile), q.Ratio, stable, best.Name, percentOf(ev.Level), bounds(q.Low, q.High),
				commas(best.Calls[Candidate]), commas(best.Calls[Stable]), commas(uint64(ev.LatencyTest)))
		}
	}
	if errs && ev.Errors.Diff > j.MinChange.Errors {
		e := ev.Errors
		return fmt.Sprintf("%s fails %.1f%% of calls against %s's %.1f%% (%+.1f points, %s bounds %+.1f to %+.1f, %s candidate calls; evidence %s:1 against no rise)",
			cand, 100*e.Candidate, stable, 100*e.Stable, e.Diff, percentOf(ev.Level), e.Low, e.High, commas(e.Calls[Candidate]),
			commas(uint64(ev.ErrorTest)))
	}
	if agr && ev.Agreement != nil {
		a := ev.Agreement
		return fmt.Sprintf("%s agrees with %s on %.1f%% of answers (%s bounds %.1f%%-%.1f%%, %s pairs), below the %s that matters",
			r.shadowName(), stable, 100*a.Agree, percentOf(1-r.spec.Judgement.Alpha/float64(r.tests())), 100*a.Low, 100*a.High,
			commas(a.Pairs), percent(100-j.MinChange.Agreement))
	}
	return ""
}

func (r *Release) shadowName() string {
	if r.spec.Shadow != nil {
		return r.spec.Shadow.Target.String()
	}
	return r.spec.Candidate.String()
}

// promotable reports whether the step has the evidence to promote: the
// minimum calls, and either every bound on the right side of the
// smallest change that matters, or (power) every estimate on the right
// side, no regression test above its bar, and the calls with which the
// tests would have caught the smallest change that matters with the
// judgement's power. Otherwise needs is about how many more candidate
// calls it takes (-1: the estimate is on the wrong side, or a test is
// above its bar), and why says which check holds it back. Every check
// must pass, so none needs a share of alpha: a candidate worse by the
// smallest change that matters passes the bounds only if the check it
// fails is fooled (probability at most alpha), and passes the power rule
// only if every test missed it (probability at most 1-power).
func (r *Release) promotable(cand uint64, suspect bool) (ok bool, needs int64, why string) {
	ev := r.evidence
	j := r.spec.Judgement
	stable, name := r.spec.Stable.String(), r.spec.Candidate.String()
	n := float64(cand)
	worst := float64(j.MinCalls) // total candidate calls needed
	var reasons []string
	blocked := false
	short := cand < uint64(j.MinCalls)
	if short {
		reasons = append(reasons, fmt.Sprintf("%s of the %s candidate calls a step takes", commas(cand), commas(uint64(j.MinCalls))))
	}
	need := func(total float64, words string) {
		if total < 0 {
			blocked = true
		}
		worst = max(total, worst)
		reasons = append(reasons, words)
	}
	limit := 1 + j.MinChange.Tail/100
	var answered uint64
	for _, c := range ev.Classes {
		answered += c.Calls[Candidate]
	}
	// The power rule: estimates on the right side, and calls enough.
	pw := powerCheck{short: max(float64(j.MinCalls)-n, 0)}
	var passed, seen []string
	for _, c := range ev.Classes {
		if float64(c.Calls[Candidate]) < 0.2*float64(answered) {
			continue // a rare class cannot hold the release back
		}
		pw.latency(c, answered, limit)
		seen = append(seen, fmt.Sprintf("%s %.2fx, %s %.2fx %s's", quantileName(c.P50.Quantile), c.P50.Ratio, quantileName(c.Tail.Quantile), c.Tail.Ratio, stable))
		for _, q := range []Ratio{c.P50, c.Tail} {
			words := fmt.Sprintf("%s's %s is %.2fx %s's for inputs of %s (%s confidence sequence %s, %s candidate calls)",
				name, quantileName(q.Quantile), q.Ratio, stable, c.Name, percentOf(ev.Level), bounds(q.Low, q.High), commas(c.Calls[Candidate]))
			if q.High > 0 && q.High < limit {
				passed = append(passed, words)
				continue
			}
			need(callsFor(n, math.Log(q.Ratio), math.Log(q.High), math.Log(limit), 1-q.Quantile, j.Alpha),
				words+fmt.Sprintf(" must be below %.2fx", limit))
		}
	}
	if len(ev.Classes) == 0 {
		pw.unknown = true
		need(2*max(n, 1), "no latencies of both versions yet")
	}
	e := ev.Errors
	words := fmt.Sprintf("%s fails %.2f%% of calls against %s's %.2f%% (%+.2f points, %s bounds %+.2f to %+.2f)",
		name, 100*e.Candidate, stable, 100*e.Stable, e.Diff, percentOf(ev.Level), e.Low, e.High)
	pw.errors(e, j.MinChange.Errors, r.j.errDone)
	seen = append(seen, fmt.Sprintf("errors %+.2f points", e.Diff))
	if e.High < j.MinChange.Errors {
		passed = append(passed, words)
	} else {
		need(callsFor(n, e.Diff, e.High, j.MinChange.Errors, 0.01, j.Alpha), words+fmt.Sprintf(" must stay below %+.1f points", j.MinChange.Errors))
	}
	if r.spec.Shadow != nil {
		f0 := j.MinChange.Agreement / 100
		if a := ev.Agreement; a == nil {
			pw.unknown = true
			need(2*max(n, 1), "no shadow answers compared yet")
		} else {
			pw.agreement(a, f0, n)
			seen = append(seen, fmt.Sprintf("agreement %.1f%%", 100*a.Agree))
			words := fmt.Sprintf("%s agrees with %s on %.1f%% of answers (bounds %.1f%%-%.1f%%, %s pairs)",
				r.shadowName(), stable, 100*a.Agree, 100*a.Low, 100*a.High, commas(a.Pairs))
			if 1-a.Low < f0 {
				passed = append(passed, words)
			} else {
				need(callsFor(n, 1-a.Agree, 1-a.Low, f0, f0, j.Alpha), words+fmt.Sprintf(" must be above %s", percent(100-j.MinChange.Agreement)))
			}
		}
	}
	if len(reasons) == 0 {
		return true, 0, strings.Join(passed, "; ")
	}
	caught := r.caughtWords()
	if suspect {
		pw.blocked = true
	}
	if !short && !pw.blocked && !pw.unknown && pw.more == 0 {
		earlier := ""
		if r.j.errDone > 0 {
			earlier = " (with the earlier steps' for the error test, which keeps its evidence)"
		}
		return true, 0, fmt.Sprintf("%s candidate calls%s, enough to have caught %s with %s power, and none seen (%s)",
			commas(cand), earlier, caught, percentOf(j.Power), strings.Join(seen, ", "))
	}
	powerWords := fmt.Sprintf("%s of the %s candidate calls that would catch %s with %s power",
		commas(cand), commas(uint64(math.Ceil(n+max(pw.more, pw.short)))), caught, percentOf(j.Power))
	switch {
	case suspect:
		powerWords = "a regression test is above its bar, though the estimates are within the smallest change that matters"
	case pw.blocked:
		powerWords = "an estimate is past the smallest change that matters"
	case pw.unknown:
		powerWords = "too few calls to tell how many would catch " + caught
	}
	reasons = append([]string{powerWords}, reasons...)
	if blocked && (pw.blocked || pw.unknown) {
		return false, -1, strings.Join(reasons, "; ")
	}
	more := worst - n // for the bounds
	if pm := max(pw.more, pw.short); !pw.blocked && !pw.unknown {
		if blocked {
			more = pm
		} else {
			more = min(more, pm)
		}
	}
	m := max(int64(math.Ceil(more)), 1)
	return false, m, fmt.Sprintf("needs about %s more candidate calls: %s", commas(uint64(m)), strings.Join(reasons, "; "))
}

// powerCheck gathers the power rule's verdict: more is how many more
// candidate calls it needs, blocked an estimate on the wrong side,
// unknown that the calls needed cannot be told yet.
type powerCheck struct {
	more, short      float64
	blocked, unknown bool
}

// latency checks one size class: its candidate calls are a share of all
// answered ones, so the calls it lacks count in that proportion.
func (p *powerCheck) latency(c ClassEvidence, answered uint64, limit float64) {
	if !(c.P50.Ratio > 0 && c.P50.Ratio < limit && c.Tail.Ratio > 0 && c.Tail.Ratio < limit) {
		p.blocked = true
	}
	if c.CallsToCatch == 0 {
		p.unknown = true
		return
	}
	if lack := float64(c.CallsToCatch) - float64(c.Calls[Candidate]); lack > 0 {
		p.more = max(p.more, lack*float64(answered)/float64(c.Calls[Candidate]))
	}
}

// errors checks the error rates; done is the part of the calls needed
// that earlier steps gave the error test.
func (p *powerCheck) errors(e ErrorEvidence, limit, done float64) {
	if !(e.Diff < limit) {
		p.blocked = true
	}
	if e.CallsToCatch == 0 {
		p.unknown = true
		return
	}
	p.more = max(p.more, (1-done)*float64(e.CallsToCatch)-float64(e.Calls[Candidate]))
}

// agreement checks the shadow's pairs; n is the step's candidate calls,
// which the missing pairs are counted in, as the calls that bring them.
func (p *powerCheck) agreement(a *AgreementEvidence, f0, n float64) {
	if !(1-a.Agree < f0) {
		p.blocked = true
	}
	if a.PairsToCatch == 0 {
		p.unknown = true
		return
	}
	if lack := float64(a.PairsToCatch) - float64(a.Pairs); lack > 0 {
		p.more = max(p.more, lack*max(n, 1)/float64(max(a.Pairs, 1)))
	}
}

// caughtWords names the smallest changes that matter: "latencies 10%
// slower or errors +0.5 points".
func (r *Release) caughtWords() string {
	m := r.spec.Judgement.MinChange
	w := fmt.Sprintf("latencies %s slower or errors %+g points", percent(m.Tail), m.Errors)
	if r.spec.Shadow != nil {
		w = fmt.Sprintf("latencies %s slower, errors %+g points or agreement %g points lower", percent(m.Tail), m.Errors, 2*m.Agreement)
	}
	return w
}

// callsFor estimates the candidate calls a bound needs to cross limit:
// est is the estimate and hi the bound now (on a scale where they shrink
// together as 1/sqrt(n)); -1 when the estimate is past the limit. With
// no bound yet (hi infinite or 0 on a log scale), it takes about the
// calls that put a few above a quantile of rarity p.
func callsFor(n, est, hi, limit, rarity, alpha float64) float64 {
	if !(est < limit) {
		return -1
	}
	if math.IsInf(est, 0) || math.IsInf(hi, 0) || math.IsNaN(hi) || hi <= est {
		return max(2*n, 3*math.Log(2/alpha)/rarity)
	}
	k := (hi - est) / (limit - est)
	return n * k * k
}

// rollback sends the candidate nothing from now on (the caller publishes
// the table).
func (r *Release) rollback(now time.Time, why string, manual bool) *Decision {
	what := "rolled back at " + percent(r.weight)
	if r.weight == 0 {
		what = "shadow stopped" // a shadow release routes nothing
	}
	d := Decision{Model: r.spec.Model, At: now, Kind: Rollback, From: r.weight, To: 0, Manual: manual, Reason: why + "; " + what}
	if manual {
		d.Reason = what + " by an operator"
		if why != "" {
			d.Reason += ": " + why
		}
	}
	r.state = RolledBack
	r.weight = 0
	r.current = d
	r.record(d)
	return &d
}

// promote moves to the next step, or to 100% after the last (the caller
// publishes the table).
func (r *Release) promote(now time.Time, why string, manual bool) *Decision {
	to := 100.0
	next := r.step + 1
	if len(r.spec.Steps) > 0 && next < len(r.spec.Steps) {
		to = r.spec.Steps[next]
	}
	d := Decision{Model: r.spec.Model, At: now, Kind: Promote, From: r.weight, To: to, Manual: manual}
	if e := r.evidence.Errors; e.CallsToCatch > 0 {
		r.j.errDone = min(r.j.errDone+float64(e.Calls[Candidate])/float64(e.CallsToCatch), 1)
	}
	switch {
	case manual:
		d.Reason = "promoted from " + percent(r.weight) + " to " + percent(to) + " by an operator"
	default:
		d.Reason = "promoted from " + percent(r.weight) + " to " + percent(to) + ": " + why
	}
	if to >= 100 {
		r.state = Promoted
		r.step = len(r.spec.Steps) - 1
	} else {
		r.state = Running
		r.step = next
	}
	r.newStep(to, now)
	r.current = d
	r.record(d)
	return &d
}

// maxHistory bounds the decisions a release keeps (and saves).
const maxHistory = 100

func (r *Release) record(d Decision) {
	if len(r.history) >= maxHistory {
		r.history = append(r.history[:0], r.history[len(r.history)-maxHistory+1:]...)
	}
	r.history = append(r.history, d)
}

// percent writes a weight: "10%", "0.5%".
func percent(w float64) string { return strconv.FormatFloat(w, 'f', -1, 64) + "%" }

// percentOf writes a level: "99%".
func percentOf(level float64) string { return percent(math.Round(level*1000) / 10) }

// quantileName writes a quantile as "p50", "p99", "p99.9".
func quantileName(q float64) string { return "p" + strconv.FormatFloat(q*100, 'f', -1, 64) }

// bounds writes a ratio's bounds: "1.22-1.40", "above 1.22", "below 1.40".
func bounds(lo, hi float64) string {
	switch {
	case lo > 0 && hi > 0:
		return fmt.Sprintf("%.2f-%.2f", lo, hi)
	case lo > 0:
		return fmt.Sprintf("above %.2f", lo)
	case hi > 0:
		return fmt.Sprintf("below %.2f", hi)
	}
	return "unbounded yet"
}

// commas writes n with thousands separators: 4,210.
func commas(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
