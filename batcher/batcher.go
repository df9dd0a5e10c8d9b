package batcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/batcher/merge"
	"github.com/infergate/infergate/proto/methods"
)

// ErrNotBatched is returned by Do for a request the batcher does not take:
// a model or method not configured, a request the codec cannot batch (it
// says merge.ErrUnbatchable), more rows than the policy's MaxSize, or a
// Batcher that is closed. The caller sends such a request on its own.
var ErrNotBatched = errors.New("batcher: not batched")

// testHookQueueFound, when a test sets it, runs between Do's lookup of a
// queue and its enqueue: where a queue's retirement can come in between.
var testHookQueueFound func(*queue)

// errRetired: the queue a call found was freed for being idle; Do looks
// it up again. Never returned by Do.
var errRetired = errors.New("batcher: queue retired")

// Sentinel errors of Do; the proxy turns them into gRPC statuses at its
// edge. Do wraps them with the model and what happened.
var (
	// ErrQueueFull: the model's queue holds its limit of requests
	// (RESOURCE_EXHAUSTED).
	ErrQueueFull = errors.New("batcher: queue full")
	// ErrShed: the adaptive batcher, with Policy.Shed, could not answer
	// the call within the SLO (RESOURCE_EXHAUSTED). It wraps ErrQueueFull:
	// the queue holds as much work as the SLO allows, and callers that
	// treat a full queue as load shedding (send elsewhere, do not blame
	// the upstream) do the same with it.
	ErrShed = fmt.Errorf("%w: shed to keep the SLO", ErrQueueFull)
	// ErrClosed: the Batcher closed while the call was queued
	// (UNAVAILABLE).
	ErrClosed = errors.New("batcher: closed")
	// ErrPanic: batching code panicked while handling the call (INTERNAL);
	// the panic is counted and logged, and other calls go on.
	ErrPanic = errors.New("batcher: internal error")
)

// Invoker makes one unary upstream call with the raw request bytes and the
// outgoing metadata md, and returns the raw response bytes with the
// upstream's response header and trailer. Its error is the call's gRPC
// status. It is called concurrently, from the Batcher's own goroutines, with
// a context that is not any single caller's.
type Invoker func(ctx context.Context, method string, req []byte, md metadata.MD) (resp []byte, header, trailer metadata.MD, err error)

// Request is one caller's unary call handed to Do.
type Request struct {
	// Upstream names the model server; requests for different upstreams
	// are never merged.
	Upstream string
	// Invoke calls that upstream. The queue keeps the Invoker of the first
	// request that created it.
	Invoke Invoker
	// Method is methods.ModelInfer or methods.Predict.
	Method string
	// Model and Version are read from the request by the caller.
	Model, Version string
	// Payload is the serialized request. The Batcher reads it until the
	// call and any retry of it have finished, which can be after Do returns
	// for a caller that gave up; it must not change meanwhile.
	Payload []byte
	// MD is the call's outgoing metadata (see the package doc for which
	// keys reach the upstream). It is not modified.
	MD metadata.MD
}

// Result is what Do measured and received for one call.
type Result struct {
	// Payload is the caller's own response; nil on error.
	Payload []byte
	// Header and Trailer are the upstream's, shared by every caller of
	// the batch: do not modify them.
	Header, Trailer metadata.MD
	// Queue is the time from Do's call to the dispatch of the batch (the
	// whole wait when the call never left the queue).
	Queue time.Duration
	// Upstream is the time of the upstream call.
	Upstream time.Duration
	// BatchSize is the number of rows of the batch the call went in; 0
	// when it was never sent.
	BatchSize int
	// Batch is the merged call the request rode in (a batch of one
	// included); nil when it was sent alone or never sent.
	Batch *Batch
}

// Option configures a Batcher. Options are sealed: build them with the With
// functions of this package (WithLogger).
type Option interface{ apply(*Batcher) }

type optionFunc func(*Batcher)

func (f optionFunc) apply(b *Batcher) { f(b) }

// Limits on what untrusted requests can make the Batcher create.
const (
	// maxQueues caps the queues of a Batcher (upstream, method, model,
	// version); a request that would need another is sent unbatched.
	maxQueues = 512
	// maxKeys caps the compatibility keys waiting in one queue at once.
	maxKeys = 64
	// queueIdle is how long a queue stays with nothing queued, in flight
	// or arriving before it is freed with its dispatcher: versions a
	// client tried once (or an old model version) do not hold a place
	// under maxQueues for good.
	queueIdle = time.Minute
)

// Batcher merges unary inference calls into batches. Create it with New; it
// is safe for concurrent use. Close it after the server has stopped.
type Batcher struct {
	// models is an immutable table, replaced whole (SetLimits) when the
	// upstream's models change: calls read it without a lock.
	models atomic.Pointer[map[string]*model]
	// auto is the policy of the models the upstream says batch
	// (Config.Auto); nil: only the configured models are batched.
	auto *Policy
	// keyHeaders split sub-queues by their values (Config.KeyHeaders).
	keyHeaders []string
	// nonIdempotent: models never sent twice (Config.NonIdempotent).
	nonIdempotent map[string]bool
	limMu         sync.Mutex // serialises SetLimits
	codecs        map[string]merge.Codec

	mu      sync.Mutex // guards queue creation and retirement
	queues  sync.Map   // queueKey → *queue
	nQueues int
	retired map[[2]string]*queueStats // counters of freed queues by (model, upstream); guarded by mu
	// caps are the queues' capacities by upstream and model (capKey →
	// *atomic.Int32), for flow control (Capacity).
	caps sync.Map

	log *slog.Logger // nil: no logging
	// replicas counts the replicas of an upstream holding a model
	// (WithReplicas); nil: one.
	replicas func(upstream, model string) int

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // dispatchers and batches in flight
}

// model is a configured or discovered model: its policy and counters.
type model struct {
	name string
	pol  Policy
	// given is the policy as configured, before it was adapted to a
	// model that is not idempotent: what Apply compares.
	given Policy
	// auto: batched because the upstream says the model batches
	// (Config.Auto), not because it was configured.
	auto bool
	// once: the model is not idempotent, so no call of it is sent twice
	// (Config.NonIdempotent); its policy's RetryUnbatched is off.
	once bool
	// limit is the upstream's max_batch_size for the model (SetLimits):
	// 0 unknown, -1 the model takes no batch dimension.
	limit    atomic.Int64
	rejected [numReasons]atomic.Uint64
}

// newModel is a batched model with policy p, which it adapts to a model
// that is not idempotent.
func (b *Batcher) newModel(name string, p Policy, auto bool) *model {
	m := &model{name: name, pol: p, given: p, auto: auto, once: b.nonIdempotent[name]}
	if m.once {
		m.pol.RetryUnbatched = false
	}
	return m
}

// maxRows is the largest batch of the model: its policy's MaxSize, capped
// by the upstream's max_batch_size when known (a larger merged batch
// would only be refused by the server, and each request sent again
// alone); 1, no merging, for a model that takes no batch.
func (m *model) maxRows() int {
	switch l := m.limit.Load(); {
	case l < 0:
		return 1
	case l > 0 && int(l) < m.pol.MaxSize:
		return int(l)
	}
	return m.pol.MaxSize
}

// New returns a Batcher for the models in cfg, which it validates (filling
// defaults).
func New(cfg Config, opts ...Option) (*Batcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Batcher{
		codecs:  map[string]merge.Codec{methods.ModelInfer: merge.KServe, methods.Predict: merge.TF},
		done:    make(chan struct{}),
		retired: map[[2]string]*queueStats{},
	}
	models := make(map[string]*model, len(cfg.Models))
	b.nonIdempotent = cfg.NonIdempotent
	for name, p := range cfg.Models {
		if p.Mode != Off {
			models[name] = b.newModel(name, p, false)
		}
	}
	b.models.Store(&models)
	for _, k := range cfg.KeyHeaders {
		b.keyHeaders = append(b.keyHeaders, strings.ToLower(k))
	}
	if cfg.Auto != nil && cfg.Auto.Mode != Off {
		p := cfg.Auto.withDefaults()
		b.auto = &p
	}
	for _, o := range opts {
		o.apply(b)
	}
	return b, nil
}

// Handles reports whether calls of method to model may be batched. It is
// cheap, so a caller can skip preparing a Request for the rest.
func (b *Batcher) Handles(method, model string) bool {
	if _, ok := (*b.models.Load())[model]; !ok {
		return false
	}
	_, ok := b.codecs[method]
	return ok
}

// Do queues one call, waits for its batch and returns the caller's own
// response. It returns ErrNotBatched, at once, for a request it does not
// take (malformed ones included: the upstream judges those); the caller
// then sends it alone. The upstream's own error is returned unchanged
// (the Invoker's status). The batcher's own errors wrap a sentinel, which
// the caller turns into a gRPC status: ErrQueueFull (a full queue),
// ErrClosed (the Batcher closed while the call was queued), ErrPanic (a
// recovered panic), or the context's error (context.Canceled,
// context.DeadlineExceeded) when ctx ends first. The Result's timings are
// valid with an error too.
func (b *Batcher) Do(ctx context.Context, r Request) (Result, error) {
	m := (*b.models.Load())[r.Model]
	codec := b.codecs[r.Method]
	if m == nil || codec == nil {
		return Result{}, ErrNotBatched
	}
	item, err := codec.Parse(r.Payload)
	switch {
	case errors.Is(err, merge.ErrInvalid):
		// Malformed: the model server, not the batcher, judges it and
		// answers with its own status, message and metadata.
		m.rejected[reasonInvalid].Add(1)
		return Result{}, ErrNotBatched
	case err != nil:
		return Result{}, ErrNotBatched // unbatchable: the upstream judges it
	case item.Rows < 1 || item.Rows >= m.maxRows():
		return Result{}, ErrNotBatched // a full batch already, or no batch dimension
	}
	q := b.queue(queueKey{upstream: r.Upstream, method: r.Method, model: r.Model, version: r.Version}, m, codec, r.Invoke)
	if q == nil {
		return Result{}, ErrNotBatched
	}
	c := &call{
		ctx:     ctx,
		item:    item,
		payload: r.Payload,
		md:      r.MD,
		key:     item.Key,
		arrived: time.Now(),
		done:    make(chan delivery, 1),
	}
	if auth := r.MD["authorization"]; len(auth) > 0 {
		c.key += "\x00" + strings.Join(auth, "\x00")
	}
	for _, k := range b.keyHeaders {
		if v := r.MD[k]; len(v) > 0 {
			c.key += "\x00" + k + "=" + strings.Join(v, "\x00")
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		c.deadline = dl
	}
	for {
		if testHookQueueFound != nil {
			testHookQueueFound(q)
		}
		alone, err := q.enqueue(c)
		switch {
		case errors.Is(err, errRetired):
			// The queue was freed, or handed over to a new policy
			// (Apply), as this call found it: take the new one, with
			// the model's policy as it is now.
			if m = (*b.models.Load())[r.Model]; m == nil {
				return Result{}, ErrNotBatched
			}
			if q = b.queue(q.key, m, codec, r.Invoke); q == nil {
				return Result{}, ErrNotBatched
			}
			continue
		case err != nil:
			return Result{}, err
		case alone:
			return q.sendAlone(c)
		}
		return q.wait(c)
	}
}

// queue returns the queue of k, creating it and its dispatcher the first
// time; nil when the Batcher is closed or holds maxQueues queues.
func (b *Batcher) queue(k queueKey, m *model, codec merge.Codec, inv Invoker) *queue {
	if q, ok := b.queues.Load(k); ok {
		return q.(*queue)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if q, ok := b.queues.Load(k); ok {
		return q.(*queue)
	}
	select {
	case <-b.done:
		return nil
	default:
	}
	if b.nQueues >= maxQueues || inv == nil {
		return nil
	}
	// The policy may have changed (Apply) since the caller read m: a
	// queue is always made with the model's current one.
	if m = (*b.models.Load())[k.model]; m == nil {
		return nil
	}
	q := newQueue(b, k, m, codec, inv)
	b.queues.Store(k, q)
	b.nQueues++
	b.wg.Add(1)
	go q.run()
	return q
}

// retire frees q if it has been idle for queueIdle at now: nothing
// queued, nothing in flight, no arrival. Its counters are kept for the
// metrics. It reports whether q is gone; a call that finds it afterwards
// gets errRetired from enqueue and looks the queue up again.
func (b *Batcher) retire(q *queue, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.retired {
		if q.handedOver && (q.stats != queueStats{}) {
			// Handed over by Apply: what it counted since goes to the
			// retired counters, so none is lost.
			b.addRetiredLocked(q)
		}
		return true
	}
	if q.n > 0 || q.inFlight > 0 || now.Sub(q.lastActive) < queueIdle {
		return false
	}
	q.retired = true
	b.queues.CompareAndDelete(q.key, q)
	b.nQueues--
	b.addRetiredLocked(q)
	return true
}

// addRetiredLocked moves q's counters to the retired ones of its model
// and upstream. Called with b.mu and q.mu held.
func (b *Batcher) addRetiredLocked(q *queue) {
	k := [2]string{q.key.model, q.key.upstream}
	acc := b.retired[k]
	if acc == nil {
		acc = &queueStats{}
		b.retired[k] = acc
	}
	acc.add(&q.stats)
	q.stats = queueStats{}
}

// Close stops the dispatchers, fails every queued call with UNAVAILABLE and
// waits for the batches in flight. Later calls to Do return ErrNotBatched.
// Closing a nil Batcher does nothing.
func (b *Batcher) Close() error {
	if b == nil {
		return nil
	}
	b.closeOnce.Do(func() {
		b.mu.Lock()
		close(b.done)
		b.mu.Unlock()
	})
	b.wg.Wait()
	return nil
}

// each calls f for every queue, in no particular order.
func (b *Batcher) each(f func(q *queue)) {
	b.queues.Range(func(_, v any) bool {
		f(v.(*queue))
		return true
	})
}

// closedError is the error of calls still queued when the Batcher closes.
func closedError(model string) error {
	return fmt.Errorf("%w: shutting down: batch queue of model %s closed", ErrClosed, model)
}

// queueFullError is the error of a call rejected by a full queue.
func queueFullError(model string, n int) error {
	return fmt.Errorf("%w: batch queue of model %s holds %d requests", ErrQueueFull, model, n)
}

// Policies returns the policy of every batched model, defaults filled,
// its MaxSize capped by the upstream's max_batch_size where known.
func (b *Batcher) Policies() map[string]Policy {
	models := *b.models.Load()
	out := make(map[string]Policy, len(models))
	for name, m := range models {
		p := m.pol
		p.MaxSize = m.maxRows()
		p.PreferredSizes = capSizes(p.PreferredSizes, p.MaxSize)
		out[name] = p
	}
	return out
}
