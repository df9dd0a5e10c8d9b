package batcher

import (
	"maps"
	"slices"
	"time"
)

// What the model server says of its models' batching. Triton's model
// config holds a model's max_batch_size (0: no batch dimension) and its
// dynamic batcher's preferred_batch_size and max_queue_delay_microseconds;
// a front end reads them (ModelConfig) and hands them to SetLimits. The
// batcher then never merges more rows than the server takes, and, with
// Config.Auto, batches the models the server batches.

// Limits is one model's batching as its server states it.
type Limits struct {
	// MaxBatchSize is the model's max_batch_size: the most rows one
	// request may carry; 0 means the model takes no batch dimension.
	MaxBatchSize int
	// PreferredSizes and MaxQueueDelay are the server's own dynamic
	// batcher's settings: hints for a static policy that sets none.
	PreferredSizes []int
	MaxQueueDelay  time.Duration
}

// SetLimits takes what the upstream says of its models now, by model
// name. A model's max_batch_size caps its merged rows whatever its
// policy's MaxSize (a request larger than that goes alone, as before);
// a model that takes no batch is no longer merged. With Config.Auto, the
// models whose MaxBatchSize is above 0 are batched with Auto's policy,
// the hints filling a static policy's PreferredSizes and MaxDelay where
// Auto leaves them unset, and a model the upstream no longer lists (or no
// longer batches) leaves the auto set; configured models stay whatever
// the upstream says. Safe to call at any time, from one goroutine or many.
func (b *Batcher) SetLimits(limits map[string]Limits) {
	b.limMu.Lock()
	defer b.limMu.Unlock()
	old := *b.models.Load()
	next := make(map[string]*model, len(old)+len(limits))
	for name, m := range old {
		if m.auto {
			if l, ok := limits[name]; !ok || l.MaxBatchSize <= 0 {
				continue // unloaded, or no longer batched
			}
		}
		next[name] = m
	}
	if b.auto != nil {
		for name, l := range limits {
			if _, ok := next[name]; ok || l.MaxBatchSize <= 0 {
				continue
			}
			p := *b.auto
			if p.Mode == Static {
				if len(p.PreferredSizes) == 0 {
					p.PreferredSizes = slices.Clone(l.PreferredSizes)
				}
				if p.MaxDelay == 0 {
					p.MaxDelay = l.MaxQueueDelay
				}
			}
			next[name] = b.newModel(name, p, true)
		}
	}
	for name, m := range next {
		if l, ok := limits[name]; ok {
			if l.MaxBatchSize > 0 {
				m.limit.Store(int64(l.MaxBatchSize))
			} else {
				m.limit.Store(-1)
			}
		}
	}
	if !maps.EqualFunc(old, next, func(a, b *model) bool { return a == b }) {
		b.models.Store(&next)
	}
}

// capSizes returns the sizes of sizes that are at most max.
func capSizes(sizes []int, max int) []int {
	return slices.DeleteFunc(slices.Clone(sizes), func(s int) bool { return s > max })
}

// refreshLimit applies the model's current cap to the queue's policy: the
// upstream's max_batch_size may arrive, or change, after the queue was
// made. Called with the lock held, before the policy is read.
func (q *queue) refreshLimit() {
	mr := q.m.maxRows()
	if mr == q.pol.MaxSize {
		return
	}
	q.pol.MaxSize = mr
	q.pol.PreferredSizes = capSizes(q.m.pol.PreferredSizes, mr)
	if q.target > mr || q.pol.Mode == Static {
		q.target = mr
	}
}

// WithReplicas tells the Batcher how many replicas of an upstream (the
// endpoints of its pool that may take calls now) hold a model: a queue
// sends up to its policy's Slots batches per replica at once, so a pool
// of four one-slot replicas runs four batches, each to the endpoint the
// pool picks. Nil, the default, is one replica. Read at most once a
// second per queue, off the call path.
func WithReplicas(f func(upstream, model string) int) Option {
	return optionFunc(func(b *Batcher) { b.replicas = f })
}

// replicasEvery is how often a queue reads its replicas.
const replicasEvery = time.Second

// refreshSlots updates the queue's slots from its replicas, at most once
// every replicasEvery. Called with the lock held.
func (q *queue) refreshSlots(now time.Time) {
	if q.b.replicas == nil || now.Sub(q.slotsAt) < replicasEvery {
		return
	}
	q.slotsAt = now
	q.slots = q.pol.Slots * min(max(q.b.replicas(q.key.upstream, q.key.model), 1), MaxSlots)
}

// ModelSource says where a batched model comes from, for the admin API.
type ModelSource struct {
	// Auto: batched because the upstream says it batches (Config.Auto).
	Auto bool `json:"auto"`
	// UpstreamMaxBatchSize is the upstream's max_batch_size; 0 unknown,
	// -1 no batch dimension.
	UpstreamMaxBatchSize int `json:"upstream_max_batch_size"`
}

// Sources returns where each batched model comes from.
func (b *Batcher) Sources() map[string]ModelSource {
	models := *b.models.Load()
	out := make(map[string]ModelSource, len(models))
	for name, m := range models {
		out[name] = ModelSource{Auto: m.auto, UpstreamMaxBatchSize: int(m.limit.Load())}
	}
	return out
}
