package batcher

import (
	"reflect"
	"slices"
)

// Apply replaces the batching policy with cfg's while calls flow: the
// models batched, each model's knobs, the auto models' policy and the
// models that are not idempotent (KeyHeaders are read at New only). It
// validates cfg first and changes nothing when it is bad.
//
// A model whose policy is the same keeps everything. A model whose policy
// changed gets new queues that carry over the old ones' latency fit,
// arrival rate and counters (the fit is the upstream's answer to batch
// sizes, whatever the knobs), so the adaptive controller does not start
// over; the old queues send what they hold with the old policy, take
// nothing new, and end. A model no longer batched has its calls sent
// alone from now on; what its queues hold is sent as before. The
// upstream's max_batch_size (SetLimits) carries over. It returns the
// models whose policy changed, was added or removed, sorted.
func (b *Batcher) Apply(cfg Config) ([]string, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b.limMu.Lock()
	defer b.limMu.Unlock()
	old := *b.models.Load()
	b.nonIdempotent = cfg.NonIdempotent
	var auto *Policy
	if cfg.Auto != nil && cfg.Auto.Mode != Off {
		p := *cfg.Auto
		auto = &p
	}
	sameAuto := reflect.DeepEqual(b.auto, auto)
	next := map[string]*model{}
	carry := func(m *model, from *model) *model {
		if from != nil {
			m.limit.Store(from.limit.Load())
			for i := range m.rejected {
				m.rejected[i].Store(from.rejected[i].Load())
			}
		}
		return m
	}
	for name, p := range cfg.Models {
		if p.Mode == Off {
			continue
		}
		m := old[name]
		if m != nil && !m.auto && reflect.DeepEqual(m.given, p) && m.once == b.nonIdempotent[name] {
			next[name] = m
			continue
		}
		next[name] = carry(b.newModel(name, p, false), m)
	}
	for name, m := range old {
		if !m.auto || next[name] != nil || auto == nil {
			continue
		}
		if sameAuto && m.once == b.nonIdempotent[name] {
			next[name] = m
			continue
		}
		next[name] = carry(b.newModel(name, *auto, true), m)
	}
	b.auto = auto
	var changed []string
	for name, m := range next {
		if old[name] != m {
			changed = append(changed, name)
		}
	}
	for name := range old {
		if next[name] == nil {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.models.Store(&next)
	b.each(func(q *queue) {
		if nm := next[q.key.model]; nm != q.m {
			b.handOverLocked(q, nm)
		}
	})
	return changed, nil
}

// handOverLocked retires q, whose model's policy changed (nm) or which
// is no longer batched (nm nil), and, for nm, puts in its place a queue
// with nm's policy that carries on q's fit, rate and counters. q sends
// what it holds and ends as soon as it is empty (retire moves the
// counters it gathered meanwhile to the retired ones). Called with b.mu
// held.
func (b *Batcher) handOverLocked(q *queue, nm *model) {
	var nq *queue
	select {
	case <-b.done:
		return // closing: the dispatchers are stopping anyway
	default:
	}
	q.mu.Lock()
	q.retired, q.handedOver = true, true
	if nm != nil {
		nq = newQueue(b, q.key, nm, q.codec, q.invoke)
		nq.fit, nq.rate, nq.stats = q.fit, q.rate, q.stats
		nq.lastActive = q.lastActive
		if nq.pol.Mode == Adaptive && q.pol.Mode == Adaptive {
			nq.target = min(q.target, nq.pol.MaxSize)
		}
		q.stats = queueStats{}
	}
	q.mu.Unlock()
	if nq != nil {
		b.queues.Store(q.key, nq)
		b.wg.Add(1)
		go nq.run()
	} else {
		b.queues.CompareAndDelete(q.key, q)
		b.nQueues--
	}
	q.poke() // it may be idle already: let it end
}
