package notify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a fake Notifier: fail decides each attempt's result, and
// every attempt is recorded with its (fake) time.
type recorder struct {
	mu        sync.Mutex
	attempts  []time.Time
	delivered []string // names (see msg), in order of success
	fail      func(attempt int, m *Message) (retryable bool, err error)
}

func (r *recorder) Notify(ctx context.Context, m *Message) (bool, error) {
	r.mu.Lock()
	r.attempts = append(r.attempts, time.Now())
	n := len(r.attempts)
	r.mu.Unlock()
	if r.fail != nil {
		if retryable, err := r.fail(n, m); err != nil {
			return retryable, err
		}
	}
	r.mu.Lock()
	r.delivered = append(r.delivered, name(m))
	r.mu.Unlock()
	return false, nil
}

func (r *recorder) got() (attempts []time.Time, delivered []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts), slices.Clone(r.delivered)
}

// msg is a message of the tests' one group, named key: a group's
// messages go out one at a time, in order.
func msg(key string) *Message {
	return &Message{GroupKey: "g", Status: StatusFiring, Alerts: []Alert{{Name: key}}}
}

// name is the name msg gave m.
func name(m *Message) string {
	if len(m.Alerts) == 0 {
		return ""
	}
	return m.Alerts[0].Name
}

// exact makes backoff waits deterministic.
var exact = optionFunc(func(o *options) { o.jitter = func(d time.Duration) time.Duration { return d } })

// outcomes reads a sender's counters.
type outcomes struct {
	success, failure, attemptOK, attemptErr            float64
	queueFull, expired, notRetryable, closed, queueLen float64
}

func readOutcomes(t *testing.T, m *Metrics, integration string) outcomes {
	t.Helper()
	l := []string{"r", integration}
	return outcomes{
		success:      counter(t, m.notifications, append(l, "success")...),
		failure:      counter(t, m.notifications, append(l, "failure")...),
		attemptOK:    counter(t, m.attempts, append(l, "success")...),
		attemptErr:   counter(t, m.attempts, append(l, "error")...),
		queueFull:    counter(t, m.dropped, append(l, reasonQueueFull)...),
		expired:      counter(t, m.dropped, append(l, reasonExpired)...),
		notRetryable: counter(t, m.dropped, append(l, reasonNotRetryable)...),
		closed:       counter(t, m.dropped, append(l, reasonClosed)...),
		queueLen:     gauge(t, m.queueLength, l...),
	}
}

func closeSender(t *testing.T, s *Sender, wait time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return s.Close(ctx)
}

// TestSenderRetriesWithBackoff: three retryable failures, then success.
// The message is delivered once after four attempts, spaced by the
// doubling backoff less at most a tenth of jitter.
func TestSenderRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(n int, _ *Message) (bool, error) {
			if n <= 3 {
				return true, errors.New("503")
			}
			return false, nil
		}}
		m := NewMetrics(nil)
		s := NewSender("r", "webhook", rec, WithMetrics(m))
		start := time.Now()
		s.Send(msg("g"))
		time.Sleep(time.Minute)
		synctest.Wait()
		attempts, delivered := rec.got()
		if len(attempts) != 4 || !slices.Equal(delivered, []string{"g"}) {
			t.Fatalf("attempts %d, delivered %v; want 4, [g]", len(attempts), delivered)
		}
		if !attempts[0].Equal(start) {
			t.Errorf("first attempt after %v, want at once", attempts[0].Sub(start))
		}
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			gap := attempts[i+1].Sub(attempts[i])
			if gap > want || gap < want-want/10 {
				t.Errorf("wait before attempt %d = %v, want %v less at most 10%%", i+2, gap, want)
			}
		}
		if err := closeSender(t, s, time.Second); err != nil {
			t.Fatal(err)
		}
		got := readOutcomes(t, m, "webhook")
		if want := (outcomes{success: 1, attemptOK: 1, attemptErr: 3}); got != want {
			t.Errorf("metrics %+v, want %+v", got, want)
		}
	})
}

// TestSenderBackoffCapped: waits double up to the maximum and stay there.
func TestSenderBackoffCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(n int, _ *Message) (bool, error) {
			if n <= 6 {
				return true, errors.New("down")
			}
			return false, nil
		}}
		s := NewSender("r", "webhook", rec, WithBackoff(time.Second, 5*time.Second), exact)
		s.Send(msg("g"))
		time.Sleep(time.Minute)
		attempts, _ := rec.got()
		var gaps []time.Duration
		for i := 1; i < len(attempts); i++ {
			gaps = append(gaps, attempts[i].Sub(attempts[i-1]))
		}
		want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
		if !slices.Equal(gaps, want) {
			t.Errorf("waits %v, want %v", gaps, want)
		}
		closeSender(t, s, time.Second)
	})
}

// TestSenderSendNeverBlocks: a notifier that hangs until cancelled holds
// up neither Send nor, past its context, Close.
func TestSenderSendNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := NotifierFunc(func(ctx context.Context, _ *Message) (bool, error) {
			<-ctx.Done()
			return true, ctx.Err()
		})
		m := NewMetrics(nil)
		s := NewSender("r", "slack", hang, WithMetrics(m), WithQueueSize(2))
		start := time.Now()
		s.Send(msg("0"))
		synctest.Wait() // "0" is in flight, hanging
		for i := 1; i <= 4; i++ {
			s.Send(msg(fmt.Sprint(i)))
		}
		synctest.Wait()
		if d := time.Since(start); d != 0 {
			t.Errorf("Send took %v of fake time", d)
		}
		if got := gauge(t, m.queueLength, "r", "slack"); got != 2 {
			t.Errorf("queue length %v, want 2", got)
		}
		if err := closeSender(t, s, 10*time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want deadline exceeded", err)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("Close returned after %v, want at its deadline, 10s", d)
		}
		got := readOutcomes(t, m, "slack")
		// 1 and 2 pushed out by 3 and 4; 0 (in flight), 3 and 4 closed.
		if want := (outcomes{failure: 5, attemptErr: 1, queueFull: 2, closed: 3}); got != want {
			t.Errorf("metrics %+v, want %+v", got, want)
		}
	})
}

// TestSenderQueueFullDropsOldest: with the worker busy, a full queue
// drops its oldest message for the new one.
func TestSenderQueueFullDropsOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		rec := &recorder{fail: func(n int, _ *Message) (bool, error) {
			if n == 1 {
				<-gate
			}
			return false, nil
		}}
		m := NewMetrics(nil)
		s := NewSender("r", "wecom", rec, WithMetrics(m), WithQueueSize(3))
		s.Send(msg("m1"))
		synctest.Wait()
		for _, k := range []string{"m2", "m3", "m4", "m5", "m6"} {
			s.Send(msg(k))
		}
		if s.Len() != 3 {
			t.Errorf("Len = %d, want 3", s.Len())
		}
		close(gate)
		if err := closeSender(t, s, time.Second); err != nil {
			t.Fatal(err)
		}
		_, delivered := rec.got()
		if want := []string{"m1", "m4", "m5", "m6"}; !slices.Equal(delivered, want) {
			t.Errorf("delivered %v, want %v", delivered, want)
		}
		got := readOutcomes(t, m, "wecom")
		if want := (outcomes{success: 4, failure: 2, attemptOK: 4, queueFull: 2}); got != want {
			t.Errorf("metrics %+v, want %+v", got, want)
		}
	})
}

// TestSenderExpires: retries stop once the message would be older than
// MaxAge, and a message that waited in the queue past MaxAge is dropped
// without an attempt.
func TestSenderExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(_ int, m *Message) (bool, error) {
			if name(m) == "slow" {
				time.Sleep(20 * time.Second)
				return false, nil
			}
			return true, errors.New("connection refused")
		}}
		m := NewMetrics(nil)
		s := NewSender("r", "email", rec, WithMetrics(m), WithMaxAge(10*time.Second), exact)
		start := time.Now()
		s.Send(msg("down"))
		time.Sleep(time.Minute)
		attempts, _ := rec.got()
		// Attempts at 0, 1, 3, 7s; the next wait (8s) would end past 10s.
		var at []time.Duration
		for _, a := range attempts {
			at = append(at, a.Sub(start))
		}
		if want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}; !slices.Equal(at, want) {
			t.Errorf("attempts at %v, want %v", at, want)
		}
		if got := readOutcomes(t, m, "email"); got.expired != 1 || got.failure != 1 {
			t.Errorf("after retries: metrics %+v, want 1 expired", got)
		}

		s.Send(msg("slow"))  // takes 20s
		s.Send(msg("stale")) // waits 20s > MaxAge in the queue
		time.Sleep(time.Minute)
		attempts, delivered := rec.got()
		if len(attempts) != 5 || !slices.Equal(delivered, []string{"slow"}) {
			t.Errorf("attempts %d, delivered %v; want 5, [slow]", len(attempts), delivered)
		}
		closeSender(t, s, time.Second)
		got := readOutcomes(t, m, "email")
		if want := (outcomes{success: 1, failure: 2, attemptOK: 1, attemptErr: 4, expired: 2}); got != want {
			t.Errorf("metrics %+v, want %+v", got, want)
		}
	})
}

// TestSenderNotRetryable: a permanent failure, or a panic, drops the
// message at once and the next one is sent.
func TestSenderNotRetryable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(_ int, m *Message) (bool, error) {
			switch name(m) {
			case "bad":
				return false, errors.New("400 Bad Request")
			case "panic":
				panic("boom")
			}
			return false, nil
		}}
		m := NewMetrics(nil)
		s := NewSender("r", "webhook", rec, WithMetrics(m))
		start := time.Now()
		for _, k := range []string{"bad", "panic", "good"} {
			s.Send(msg(k))
		}
		if err := closeSender(t, s, time.Second); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("took %v: a permanent failure must not back off", d)
		}
		attempts, delivered := rec.got()
		if len(attempts) != 3 || !slices.Equal(delivered, []string{"good"}) {
			t.Errorf("attempts %d, delivered %v; want 3, [good]", len(attempts), delivered)
		}
		got := readOutcomes(t, m, "webhook")
		if want := (outcomes{success: 1, failure: 2, attemptOK: 1, attemptErr: 2, notRetryable: 2}); got != want {
			t.Errorf("metrics %+v, want %+v", got, want)
		}
	})
}

// TestSenderOrderThroughOutage: messages sent during an outage queue up
// and are all delivered, in order, when it ends; Close drains them.
func TestSenderOrderThroughOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		outage := 5 * time.Minute
		rec := &recorder{fail: func(int, *Message) (bool, error) {
			if time.Since(start) < outage {
				return true, errors.New("502 Bad Gateway")
			}
			return false, nil
		}}
		m := NewMetrics(nil)
		s := NewSender("r", "alertmanager", rec, WithMetrics(m))
		var want []string
		for i := range 100 {
			k := fmt.Sprint(i)
			want = append(want, k)
			s.Send(msg(k))
			time.Sleep(3 * time.Second) // spread over the outage
		}
		if err := closeSender(t, s, 10*time.Minute); err != nil {
			t.Fatalf("Close = %v, want drained", err)
		}
		if time.Since(start) < outage {
			t.Errorf("closed after %v, before the outage ended", time.Since(start))
		}
		_, delivered := rec.got()
		if !slices.Equal(delivered, want) {
			t.Errorf("delivered %v, want 0..99 in order", delivered)
		}
		got := readOutcomes(t, m, "alertmanager")
		if got.success != 100 || got.failure != 0 || got.queueLen != 0 {
			t.Errorf("metrics %+v, want 100 successes", got)
		}
	})
}

// TestSenderCloseDrains: Close waits for the queue to be delivered, and a
// Send after Close is dropped and counted.
func TestSenderCloseDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(int, *Message) (bool, error) {
			time.Sleep(time.Second)
			return false, nil
		}}
		m := NewMetrics(nil)
		s := NewSender("r", "log", rec, WithMetrics(m))
		start := time.Now()
		for i := range 5 {
			s.Send(msg(fmt.Sprint(i)))
		}
		if err := closeSender(t, s, time.Minute); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("Close returned after %v, want 5s (five sends)", d)
		}
		s.Send(msg("late"))
		if err := closeSender(t, s, time.Second); err != nil {
			t.Errorf("second Close = %v", err)
		}
		_, delivered := rec.got()
		if want := []string{"0", "1", "2", "3", "4"}; !slices.Equal(delivered, want) {
			t.Errorf("delivered %v, want %v", delivered, want)
		}
		got := readOutcomes(t, m, "log")
		if want := (outcomes{success: 5, failure: 1, attemptOK: 5, closed: 1}); got != want {
			t.Errorf("metrics %+v, want %+v", got, want)
		}
	})
}

// TestNilMetrics: a Sender without metrics works.
func TestNilMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(n int, _ *Message) (bool, error) { return n == 1, errors.New("x") }}
		s := NewSender("r", "webhook", rec)
		s.Send(msg("a"))
		s.Send(msg("b"))
		if err := closeSender(t, s, time.Minute); err != nil {
			t.Fatal(err)
		}
		if attempts, _ := rec.got(); len(attempts) != 3 {
			t.Errorf("attempts %d, want 3", len(attempts))
		}
	})
}

// TestSenderNoHeadOfLineBlocking: a group whose message the receiver
// keeps refusing with a 500 holds up no other group's message, while its
// own later message still waits behind it (order within a group).
func TestSenderNoHeadOfLineBlocking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(_ int, m *Message) (bool, error) {
			if m.GroupKey == "bad" {
				return true, errors.New("500 Internal Server Error")
			}
			return false, nil
		}}
		s := NewSender("r", "webhook", rec, exact)
		start := time.Now()
		s.Send(&Message{GroupKey: "bad", Alerts: []Alert{{Name: "poison"}}})
		s.Send(&Message{GroupKey: "bad", Alerts: []Alert{{Name: "behind-poison"}}})
		synctest.Wait()
		var outcome []Outcome
		s.SendTracked(&Message{GroupKey: "good", Alerts: []Alert{{Name: "other-group"}}}, time.Now(),
			func(o Outcome) { outcome = append(outcome, o) })
		synctest.Wait()
		if d := time.Since(start); d != 0 {
			t.Fatalf("took %v", d)
		}
		_, delivered := rec.got()
		if !slices.Equal(delivered, []string{"other-group"}) || !slices.Equal(outcome, []Outcome{Delivered}) {
			t.Errorf("delivered %v (outcome %v) at once; want [other-group] (Delivered) while the bad group retries", delivered, outcome)
		}
		if s.Len() != 1 {
			t.Errorf("Len = %d, want 1 (behind-poison waits for its group)", s.Len())
		}
		if err := closeSender(t, s, time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want deadline exceeded (the bad group never drains)", err)
		}
	})
}

// TestSenderOutcomes: a tracked message reports Delivered, GivenUp (not
// retryable) or Abandoned (closed before delivery, still owed).
func TestSenderOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(_ int, m *Message) (bool, error) {
			switch name(m) {
			case "refused":
				return false, errors.New("400 Bad Request")
			case "down":
				return true, errors.New("connection refused")
			}
			return false, nil
		}}
		s := NewSender("r", "webhook", rec, exact)
		got := map[string]Outcome{}
		var mu sync.Mutex
		track := func(n string) func(Outcome) {
			return func(o Outcome) { mu.Lock(); got[n] = o; mu.Unlock() }
		}
		for _, n := range []string{"ok", "refused", "down"} {
			s.SendTracked(&Message{GroupKey: n, Alerts: []Alert{{Name: n}}}, time.Now(), track(n))
		}
		synctest.Wait()
		closeSender(t, s, time.Second)
		s.SendTracked(msg("late"), time.Now(), track("late"))
		want := map[string]Outcome{"ok": Delivered, "refused": GivenUp, "down": Abandoned, "late": Abandoned}
		mu.Lock()
		defer mu.Unlock()
		for n, o := range want {
			if got[n] != o {
				t.Errorf("%s: outcome %v, want %v", n, got[n], o)
			}
		}
	})
}

// TestSenderMaxAttempts: retries stop after the maximum number of
// attempts even while the message is young, counted as max_attempts.
func TestSenderMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{fail: func(int, *Message) (bool, error) { return true, errors.New("503") }}
		m := NewMetrics(nil)
		s := NewSender("r", "webhook", rec, WithMetrics(m), WithMaxAttempts(3), exact)
		var got Outcome = -1
		s.SendTracked(msg("x"), time.Now(), func(o Outcome) { got = o })
		time.Sleep(time.Minute)
		synctest.Wait()
		attempts, _ := rec.got()
		if len(attempts) != 3 || got != GivenUp {
			t.Errorf("%d attempts, outcome %v; want 3, GivenUp", len(attempts), got)
		}
		if d := counter(t, m.dropped, "r", "webhook", "max_attempts"); d != 1 {
			t.Errorf("max_attempts drops = %v, want 1", d)
		}
		closeSender(t, s, time.Second)
	})
}
