package notify

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Sender delivers messages to one integration of one receiver: a bounded
// FIFO queue and one worker goroutine that sends in order. Send never
// blocks; a retryable failure is retried with exponential backoff until it
// succeeds or the message is older than the maximum age, so messages queue
// up through an outage instead of being lost, and are delivered in order
// when the integration comes back.
type Sender struct {
	receiver    string
	integration string
	notifier    Notifier
	log         *slog.Logger
	metrics     *senderMetrics
	now         func() time.Time
	backoffMin  time.Duration
	backoffMax  time.Duration
	maxAge      time.Duration
	// jitter shortens a backoff wait a little, so that senders failing
	// together do not retry in lockstep.
	jitter func(time.Duration) time.Duration

	// ctx is the worker's; cancelled when Close gives up draining, which
	// aborts the attempt in flight and any backoff wait.
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // 1-buffered: "the queue or closed changed"
	done   chan struct{} // closed when the worker has returned

	mu     sync.Mutex
	queue  ring
	closed bool
}

// entry is one queued message and when it was queued, for MaxAge.
type entry struct {
	m  *Message
	at time.Time
}

func newSender(receiver, integration string, n Notifier, o options) *Sender {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sender{
		receiver:    receiver,
		integration: integration,
		notifier:    n,
		log:         o.senderLogger().With("receiver", receiver, "integration", integration),
		metrics:     o.metrics.forSender(receiver, integration),
		now:         o.now,
		backoffMin:  o.backoffInitial,
		backoffMax:  o.backoffMax,
		maxAge:      o.maxAge,
		jitter:      o.jitter,
		ctx:         ctx,
		cancel:      cancel,
		wake:        make(chan struct{}, 1),
		done:        make(chan struct{}),
		queue:       ring{buf: make([]entry, o.queueSize)},
	}
	s.metrics.queued(0)
	go s.run()
	return s
}

// jitter returns d less up to a tenth, at random.
func jitter(d time.Duration) time.Duration {
	if d < 10 {
		return d
	}
	return d - rand.N(d/10)
}

// Len returns the number of messages waiting, not counting the one being
// sent.
func (s *Sender) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.n
}

// Send queues m and returns at once. When the queue is full the oldest
// waiting message is dropped (reason queue_full): when alerts pile up the
// newest describes the present best. After Close, m is dropped (reason
// closed). m must not be modified afterwards.
func (s *Sender) Send(m *Message) {
	e := entry{m: m, at: s.now()}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.drop(e, reasonClosed, nil)
		return
	}
	old, dropped := s.queue.push(e)
	s.metrics.queued(s.queue.n) // under the lock: in order with the worker's
	s.mu.Unlock()
	if dropped {
		s.drop(old, reasonQueueFull, nil)
	}
	s.signal()
}

// signal wakes the worker without blocking.
func (s *Sender) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops accepting messages and lets the worker deliver what is
// queued until ctx ends; then it cancels the attempt in flight, drops what
// is left (reason closed) and waits for the worker to return. It returns
// ctx's error when it had to give up on messages, else nil. Calling it
// again waits for the same worker.
func (s *Sender) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
	select {
	case <-s.done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return ctx.Err()
	}
}

// run is the worker: it takes messages in order until closed and empty, or
// cancelled.
func (s *Sender) run() {
	defer close(s.done)
	for {
		e, ok := s.next()
		if !ok {
			return
		}
		s.deliver(e)
	}
}

// next waits for the oldest queued message. It reports false when the
// worker should return: closed with nothing queued, or cancelled, in
// which case the queued messages are dropped.
func (s *Sender) next() (entry, bool) {
	for {
		s.mu.Lock()
		if s.ctx.Err() != nil {
			var left []entry
			for s.queue.n > 0 {
				left = append(left, s.queue.pop())
			}
			s.metrics.queued(0)
			s.mu.Unlock()
			for _, e := range left {
				s.drop(e, reasonClosed, nil)
			}
			return entry{}, false
		}
		if s.queue.n > 0 {
			e := s.queue.pop()
			s.metrics.queued(s.queue.n)
			s.mu.Unlock()
			return e, true
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return entry{}, false
		}
		select {
		case <-s.wake:
		case <-s.ctx.Done():
		}
	}
}

// deliver sends one message until it succeeds, fails for good, expires or
// the worker is cancelled.
func (s *Sender) deliver(e entry) {
	wait := s.backoffMin
	for attempt := 1; ; attempt++ {
		if s.now().Sub(e.at) > s.maxAge {
			s.drop(e, reasonExpired, nil)
			return
		}
		retryable, err := s.notify(e.m)
		s.metrics.attempt(err == nil)
		if err == nil {
			s.metrics.delivered()
			if attempt > 1 {
				s.log.Info("alert notification delivered after retries", "group", e.m.GroupKey, "attempts", attempt)
			}
			return
		}
		switch {
		case s.ctx.Err() != nil:
			s.drop(e, reasonClosed, err)
			return
		case !retryable:
			s.drop(e, reasonNotRetryable, err)
			return
		}
		d := s.jitter(wait)
		// Waiting past the maximum age only to drop the message then
		// would hold up the messages behind it.
		if s.now().Add(d).Sub(e.at) > s.maxAge {
			s.drop(e, reasonExpired, err)
			return
		}
		s.log.Debug("alert notification failed, retrying", "group", e.m.GroupKey, "attempt", attempt, "retry_in", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			s.drop(e, reasonClosed, err)
			return
		}
		wait = min(2*wait, s.backoffMax)
	}
}

// notify calls the notifier, turning a panic into a failure that is not
// retried, so that one bad message cannot kill the worker.
func (s *Sender) notify(m *Message) (retryable bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			retryable, err = false, fmt.Errorf("notifier panicked: %v", p)
		}
	}()
	return s.notifier.Notify(s.ctx, m)
}

// drop gives up on a message: counted once as a failure and logged.
func (s *Sender) drop(e entry, reason string, err error) {
	s.metrics.drop(reason)
	attrs := []any{"reason", reason, "group", e.m.GroupKey, "status", e.m.Status, "alerts", len(e.m.Alerts)}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	s.log.Warn("alert notification dropped", attrs...)
}

// ring is a fixed-capacity FIFO.
type ring struct {
	buf  []entry
	head int
	n    int
}

// push appends e; when full it first removes and returns the oldest.
func (r *ring) push(e entry) (old entry, dropped bool) {
	if r.n == len(r.buf) {
		old, dropped = r.pop(), true
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
	return old, dropped
}

// pop removes and returns the oldest entry; the ring must not be empty.
func (r *ring) pop() entry {
	e := r.buf[r.head]
	r.buf[r.head] = entry{} // let the message be collected
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return e
}
