package notify

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Sender delivers messages to one integration of one receiver. Each
// alert group has its own FIFO queue and worker goroutine, so messages of
// a group go out in order (a resolved notice never overtakes its firing
// one) while one group's failing message (a receiver that answers 500 to
// its payload, for an hour) holds up no other group. Send never blocks;
// a retryable failure is retried with exponential backoff until it
// succeeds or the message is older than the maximum age, so messages
// queue up through an outage instead of being lost. All groups together
// hold at most the queue size.
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
	maxAttempts int
	queueSize   int
	// jitter shortens a backoff wait a little, so that senders failing
	// together do not retry in lockstep.
	jitter func(time.Duration) time.Duration

	// ctx is the workers'; cancelled when Close gives up draining, which
	// aborts the attempts in flight and any backoff wait.
	ctx     context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup

	mu     sync.Mutex
	groups map[string]*groupQueue // by GroupKey; present while it has a worker
	queued int                    // messages waiting, all groups, not counting those in flight
	closed bool
}

// groupQueue is one group's waiting messages, oldest first.
type groupQueue struct {
	entries []entry
}

// entry is one queued message, when it was made (for MaxAge: the
// original time, for a message owed since before a restart), and whom to
// tell how it ended.
type entry struct {
	m    *Message
	at   time.Time
	done func(Outcome)
}

// Outcome is how a tracked message ([Sender.SendTracked]) ended.
type Outcome int

const (
	// Delivered: the integration accepted the message.
	Delivered Outcome = iota
	// GivenUp: dropped for good (not retryable, too old, queue full).
	GivenUp
	// Abandoned: the sender closed before the message was delivered; it
	// is still owed (a persisted outbox sends it after a restart).
	Abandoned
)

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
		maxAttempts: o.maxAttempts,
		queueSize:   o.queueSize,
		jitter:      o.jitter,
		ctx:         ctx,
		cancel:      cancel,
		groups:      map[string]*groupQueue{},
	}
	s.metrics.queued(0)
	return s
}

// Integration returns the integration's name, e.g. "webhook" or
// "webhook/1".
func (s *Sender) Integration() string { return s.integration }

// jitter returns d less up to a tenth, at random.
func jitter(d time.Duration) time.Duration {
	if d < 10 {
		return d
	}
	return d - rand.N(d/10)
}

// Len returns the number of messages waiting, not counting those being
// sent.
func (s *Sender) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

// Send queues m and returns at once. m must not be modified afterwards.
// See SendTracked.
func (s *Sender) Send(m *Message) { s.SendTracked(m, s.now(), nil) }

// SendTracked queues m, made at at, and returns at once; done, unless
// nil, is called once with how it ended. When the queue is full the
// oldest waiting message of m's group is dropped for it (reason
// queue_full: the newest describes the present best), or, when its group
// has none waiting, m itself. After Close, m is dropped (reason closed,
// Abandoned). m must not be modified afterwards.
func (s *Sender) SendTracked(m *Message, at time.Time, done func(Outcome)) {
	e := entry{m: m, at: at, done: done}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.drop(e, reasonClosed, nil, Abandoned)
		return
	}
	g := s.groups[m.GroupKey]
	if g == nil {
		g = &groupQueue{}
		s.groups[m.GroupKey] = g
		s.workers.Add(1)
		go s.run(m.GroupKey, g)
	}
	var dropped *entry
	if s.queued >= s.queueSize {
		if len(g.entries) == 0 {
			s.mu.Unlock()
			s.drop(e, reasonQueueFull, nil, GivenUp)
			return
		}
		old := g.entries[0]
		g.entries = g.entries[1:]
		s.queued--
		dropped = &old
	}
	g.entries = append(g.entries, e)
	s.queued++
	s.metrics.queued(s.queued) // under the lock: in order with the workers'
	s.mu.Unlock()
	if dropped != nil {
		s.drop(*dropped, reasonQueueFull, nil, GivenUp)
	}
}

// Close stops accepting messages and lets the workers deliver what is
// queued until ctx ends; then it cancels the attempts in flight, drops
// what is left (reason closed, Abandoned) and waits for the workers to
// return. It returns ctx's error when it had to give up on messages, else
// nil. Calling it again waits for the same workers.
func (s *Sender) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.workers.Wait(); close(done) }()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.cancel()
		<-done
		return ctx.Err()
	}
}

// run is a group's worker: it sends the group's messages in order and
// returns when the group has none left (a later message starts a new
// worker), or when cancelled, dropping what is left.
func (s *Sender) run(key string, g *groupQueue) {
	defer s.workers.Done()
	for {
		s.mu.Lock()
		if s.ctx.Err() != nil {
			left := g.entries
			g.entries = nil
			s.queued -= len(left)
			delete(s.groups, key)
			s.metrics.queued(s.queued)
			s.mu.Unlock()
			for _, e := range left {
				s.drop(e, reasonClosed, nil, Abandoned)
			}
			return
		}
		if len(g.entries) == 0 {
			delete(s.groups, key)
			s.mu.Unlock()
			return
		}
		e := g.entries[0]
		g.entries[0] = entry{} // let the message be collected
		g.entries = g.entries[1:]
		s.queued--
		s.metrics.queued(s.queued)
		s.mu.Unlock()
		s.deliver(e)
	}
}

// deliver sends one message until it succeeds, fails for good, expires or
// the worker is cancelled.
func (s *Sender) deliver(e entry) {
	wait := s.backoffMin
	for attempt := 1; ; attempt++ {
		if s.now().Sub(e.at) > s.maxAge {
			s.drop(e, reasonExpired, nil, GivenUp)
			return
		}
		retryable, err := s.notify(e.m)
		s.metrics.attempt(err == nil)
		if err == nil {
			s.metrics.delivered()
			if attempt > 1 {
				s.log.Info("alert notification delivered after retries", "group", e.m.GroupKey, "attempts", attempt)
			}
			if e.done != nil {
				e.done(Delivered)
			}
			return
		}
		switch {
		case s.ctx.Err() != nil:
			s.drop(e, reasonClosed, err, Abandoned)
			return
		case !retryable:
			s.drop(e, reasonNotRetryable, err, GivenUp)
			return
		case attempt >= s.maxAttempts:
			s.drop(e, reasonMaxAttempts, err, GivenUp)
			return
		}
		d := s.jitter(wait)
		// Waiting past the maximum age only to drop the message then
		// would hold up the group's messages behind it.
		if s.now().Add(d).Sub(e.at) > s.maxAge {
			s.drop(e, reasonExpired, err, GivenUp)
			return
		}
		s.log.Debug("alert notification failed, retrying", "group", e.m.GroupKey, "attempt", attempt, "retry_in", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			s.drop(e, reasonClosed, err, Abandoned)
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

// drop gives up on a message: counted once as a failure, logged, and
// reported to its tracker.
func (s *Sender) drop(e entry, reason string, err error, o Outcome) {
	s.metrics.drop(reason)
	attrs := []any{"reason", reason, "group", e.m.GroupKey, "status", e.m.Status, "alerts", len(e.m.Alerts)}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	if o == Abandoned {
		attrs = append(attrs, "owed", e.done != nil)
	}
	s.log.Warn("alert notification dropped", attrs...)
	if e.done != nil {
		e.done(o)
	}
}
