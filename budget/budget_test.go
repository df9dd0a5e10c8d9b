package budget

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// waiter records how its wait ended.
type waiter struct {
	mu       sync.Mutex
	admitted int64
	refused  *Error
}

func (w *waiter) Admitted(n int64) { w.mu.Lock(); w.admitted = n; w.mu.Unlock() }
func (w *waiter) Refused(err *Error) {
	w.mu.Lock()
	w.refused = err
	w.mu.Unlock()
}

func (w *waiter) state() (int64, *Error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.admitted, w.refused
}

// TestReserveFirstComeFirstServed: requests that do not fit wait in
// order; room is handed to the first that fits the budget, and one held
// back by its own connection's share holds back no one else.
func TestReserveFirstComeFirstServed(t *testing.T) {
	b := New(100)
	var connA, connB Share
	var r0, r1, r2, r3 Reservation
	var w1, w2, w3 waiter
	if !b.Reserve(&r0, nil, &connA, 50, time.Time{}) {
		t.Fatal("50 of 100 refused on an empty budget")
	}
	// connA's share is 50: r1 waits for its connection, not the budget.
	if b.Reserve(&r1, &w1, &connA, 10, time.Time{}) {
		t.Fatal("a connection passed its half of the budget")
	}
	// r2 from another connection fits, r1 waiting on its share notwithstanding.
	if !b.Reserve(&r2, &w2, &connB, 40, time.Time{}) {
		t.Fatal("a request that fits waited behind one held by its own connection")
	}
	// Nor does it hold back a window that widens.
	if !b.TryTake(1) {
		t.Fatal("TryTake refused with only a request held back by its own connection waiting")
	}
	b.GiveBack(1)
	// r3 waits for the budget itself.
	if b.Reserve(&r3, &w3, &Share{}, 20, time.Time{}) {
		t.Fatal("110 of 100 bytes taken")
	}
	if st := b.Stats(); st.Held != 90 || st.Waits != 2 {
		t.Fatalf("stats %+v, want 90 held and 2 waits", st)
	}
	if b.TryTake(1) {
		t.Fatal("TryTake took room with requests waiting")
	}
	b.Release(&r0) // 40 held: r1 (10, connA) and r3 (20) fit, in order
	if n, _ := w1.state(); n != 10 {
		t.Fatalf("r1 admitted %d, want 10", n)
	}
	if n, _ := w3.state(); n != 20 {
		t.Fatalf("r3 admitted %d, want 20", n)
	}
	for _, r := range []*Reservation{&r1, &r2, &r3} {
		b.Release(r)
	}
	if st := b.Stats(); st.Held != 0 {
		t.Fatalf("%d bytes held after every release", st.Held)
	}
}

// TestReserveRefusedAtItsDeadline: a request still waiting at its
// deadline is refused with an Error naming the budget and its size; one
// released while waiting is never told anything.
func TestReserveRefusedAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(100)
		var share Share
		var held, late, gone Reservation
		var wLate, wGone waiter
		b.Reserve(&held, nil, &share, 50, time.Time{})
		if b.Reserve(&late, &wLate, &Share{}, 80, time.Now().Add(time.Second)) {
			t.Fatal("130 of 100 bytes taken")
		}
		b.Reserve(&gone, &wGone, &Share{}, 80, time.Now().Add(time.Second))
		b.Release(&gone) // its client went away
		time.Sleep(time.Second)
		synctest.Wait()
		if _, err := wLate.state(); err == nil || err.Limit != 100 || err.Size != 80 {
			t.Fatalf("refusal %v, want the budget's 100 and the request's 80 bytes", err)
		}
		if n, err := wGone.state(); n != 0 || err != nil {
			t.Fatalf("a released request was told %d, %v", n, err)
		}
		if st := b.Stats(); st.Refusals != 1 || st.Held != 50 {
			t.Fatalf("stats %+v, want 1 refusal, 50 held", st)
		}
		b.Release(&held)
	})
}
