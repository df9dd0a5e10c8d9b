package route

import "time"

// The hedge delay: how long a routed model's primary gets before the
// fallback (or another replica of its pool) is asked too, and when a
// primary still unanswered then is evidence for its breaker. The proxy
// makes the hedge (its routed calls); this is the policy it asks.

// Patience is how long the primary of mr gets before the fallback is asked (a
// hedge) or a cascade answers with the edge's answer it holds: the hedge
// delay, and no later than half of what the call's deadline (zero: none)
// leaves; 0 for no limit. slow says whether the primary still unanswered then counts as
// a slow call for its breaker whatever else it did: a hedge is evidence
// only once its delay is. A configured delay is the operator's word; an
// automatic one, or one judged against the primary's tail, only once the
// tail has enough calls behind it (tailKnown): at a cold start a p99.9
// learnt from a few dozen calls would trip the breaker of a healthy
// primary. A hang is evidence whatever the delay (see Hung).
func (r *Router) Patience(mr *ModelRoute, deadline time.Time) (after time.Duration, slow bool) {
	after = mr.HedgeAfter() // 0: off, or automatic with the tail unknown
	auto := mr.cfg.HedgeAfter == 0
	known := mr.live.tailKnown()
	slow = !auto || known
	if !deadline.IsZero() && mr.cfg.HedgeAfter >= 0 {
		// The fallback needs time to answer: no later than half of what
		// the deadline leaves; with the tail unknown, that is the
		// automatic delay (a primary hung from the start is then hedged
		// before the callers' deadlines, though not counted slow: its
		// callers are answered, and its breaker waits for evidence).
		// Shorter than the model's delay, it shows the primary slow only
		// past the slowest of its healthy calls (its p99.9, once known).
		// An automatic delay never ends before that: it would replace
		// healthy answers that were still on time.
		if left := deadline.Sub(r.opts.Now()) / 2; left > 0 && (after == 0 || left < after) {
			tail := time.Duration(mr.live.tail.Load())
			after = left
			if auto {
				after = max(after, tail)
			}
			slow = known && tail > 0 && after > tail
		}
	}
	return after, slow
}

// minHedgeAfter is the least automatic hedge delay.
const minHedgeAfter = 10 * time.Millisecond

// HedgeAfter is the model's hedge delay: configured, or three times the
// primary's recent p99.9 (see censoredTail), at least 10ms, or 0 while
// that is unknown (then only a call's deadline sets one: see Patience).
// Not capped: a model whose healthy calls take minutes is hedged only
// past its own tail, and a call's deadline bounds the delay.
func (mr *ModelRoute) HedgeAfter() time.Duration {
	d := mr.cfg.HedgeAfter
	if d != 0 {
		return d
	}
	if tail := time.Duration(mr.live.tail.Load()); tail > 0 {
		return max(3*tail, minHedgeAfter)
	}
	return 0
}

// hangDelays is how many of a call's hedge delays the primary must have
// answered nothing of a model while calls were sent to it for that call,
// still unanswered at its delay, to be evidence of a hang on its own:
// whatever tail was learnt, and however young it is. A cold start whose
// first calls are slow is answered within a few delays, and one slow call
// among answered ones says nothing; a hang answers none.
const hangDelays = 3

// Sent notes that a call was sent to the primary at now (unix
// nanoseconds): the start of its silence unless it answered since.
func (l *Live) Sent(now int64) {
	if l.waiting.Load() == 0 {
		l.waiting.CompareAndSwap(0, now)
	}
}

// Answered notes an answer of the primary: its silence is over.
func (l *Live) Answered() {
	if l.waiting.Load() != 0 {
		l.waiting.Store(0)
	}
}

// silentFor says whether the primary has answered nothing of the model
// for at least d by now (unix nanoseconds), while calls were sent to it:
// the first call sent since its last answer went at least d ago.
func (l *Live) silentFor(now int64, d time.Duration) bool {
	w := l.waiting.Load()
	return w != 0 && now-w >= int64(d)
}

// Hung says whether the primary has been silent for the model for
// hangDelays of a call's hedge delay after, by now (unix nanoseconds).
func (l *Live) Hung(now int64, after time.Duration) bool {
	return l.silentFor(now, hangDelays*after)
}
