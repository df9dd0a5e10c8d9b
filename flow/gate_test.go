package flow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// harness is a gate of fixed capacity and the order its waiters went in.
type harness struct {
	t     *testing.T
	g     *Gate
	mu    sync.Mutex
	order []string
	errs  map[string]error
}

func newHarness(t *testing.T, capacity int, o GateOptions) *harness {
	o.Capacity = func() int { return capacity }
	return &harness{t: t, g: NewGate(o), errs: map[string]error{}}
}

// wait starts a call named name that waits its turn; it records when it
// went (or why not).
func (h *harness) wait(ctx context.Context, name string, c Call) {
	go func() {
		err := h.g.Acquire(ctx, c)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil {
			h.errs[name] = err
			return
		}
		h.order = append(h.order, name)
	}()
	synctest.Wait()
}

// run lets the calls that went finish one at a time, n times.
func (h *harness) run(n int) []string {
	for range n {
		h.g.Done(time.Millisecond)
		synctest.Wait()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.order...)
}

func TestGatePassesUnderCapacity(t *testing.T) {
	g := NewGate(GateOptions{Capacity: func() int { return 2 }})
	for range 2 {
		if err := g.Acquire(t.Context(), Call{Tenant: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if st := g.Stats(); st.InFlight != 2 || st.Waiting != 0 || st.Waited[Standard]+st.Waited[Critical] != 0 {
		t.Errorf("stats %+v, want 2 in flight, none waited", st)
	}
	g.Done(time.Millisecond)
	if n := testing.AllocsPerRun(100, func() {
		_ = g.Acquire(context.Background(), Call{Tenant: "a"})
		g.Done(time.Millisecond)
	}); n > 0 {
		t.Errorf("a call under capacity allocates %.1f times, want 0", n)
	}
}

// Within a band, a tenant sending many calls and one sending few take
// turns; weights set the turns' shares.
func TestGateFairWithinBand(t *testing.T) {
	for _, tc := range []struct {
		name   string
		weight float64
		want   string
	}{
		{"equal", 1, "B1 C1 B2 C2 B3 C3 B4 B5 B6"},
		{"B weighs 2", 2, "B1 B2 C1 B3 B4 C2 B5 B6 C3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, 1, GateOptions{})
				if err := h.g.Acquire(t.Context(), Call{Tenant: "x"}); err != nil {
					t.Fatal(err)
				}
				for i := 1; i <= 6; i++ {
					h.wait(t.Context(), fmt.Sprint("B", i), Call{Tenant: "B", Band: Standard, Weight: tc.weight})
				}
				for i := 1; i <= 3; i++ {
					h.wait(t.Context(), fmt.Sprint("C", i), Call{Tenant: "C", Band: Standard})
				}
				got := fmt.Sprint(h.run(9))
				if got != "["+tc.want+"]" {
					t.Errorf("order %s, want [%s]", got, tc.want)
				}
			})
		})
	}
}

// Bands go in order, but a lower band waiting gets its minimum share.
func TestGateBandsAndMinimumShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 1, GateOptions{})
		if err := h.g.Acquire(t.Context(), Call{}); err != nil {
			t.Fatal(err)
		}
		h.wait(t.Context(), "S1", Call{Tenant: "s", Band: Standard})
		h.wait(t.Context(), "C1", Call{Tenant: "c", Band: Critical})
		if got := fmt.Sprint(h.run(2)); got != "[C1 S1]" {
			t.Fatalf("order %s, want the critical call first", got)
		}
		// Critical calls always waiting: the standard ones still get 5%.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		for i := range 400 {
			h.wait(ctx, fmt.Sprint("c", i), Call{Tenant: "c", Band: Critical})
		}
		for i := range 100 {
			h.wait(ctx, fmt.Sprint("s", i), Call{Tenant: "s", Band: Standard})
		}
		order := h.run(400)[2:]
		std := 0
		for _, n := range order {
			if n[0] == 's' {
				std++
			}
		}
		if share := float64(std) / float64(len(order)); share < 0.04 || share > 0.07 {
			t.Errorf("standard calls got %.1f%% of %d sent, want about 5%%", 100*share, len(order))
		}
	})
}

// A call whose deadline cannot be met is refused at once, naming why;
// one whose deadline nears while it waits is refused then, not after it.
func TestGateDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 1, GateOptions{})
		if err := h.g.Acquire(t.Context(), Call{}); err != nil {
			t.Fatal(err)
		}
		// Learn the pace: a call every 10ms, taking 10ms.
		for i := range 5 {
			h.wait(t.Context(), fmt.Sprint("w", i), Call{Tenant: "w"})
		}
		for range 5 {
			time.Sleep(10 * time.Millisecond)
			h.g.Done(10 * time.Millisecond)
			synctest.Wait()
		}
		for i := range 10 {
			h.wait(t.Context(), fmt.Sprint("q", i), Call{Tenant: "q"})
		}
		start := time.Now()
		err := h.g.Acquire(t.Context(), Call{Tenant: "q", Deadline: start.Add(50 * time.Millisecond)})
		if !errors.Is(err, ErrDeadline) || time.Since(start) != 0 {
			t.Fatalf("a call 11th in line with 50ms left: %v after %s, want ErrDeadline at once", err, time.Since(start))
		}
		t.Log(err)
		// Another tenant's call goes in the next round, behind one of
		// q's: 20ms of wait and 10ms of its own leave it room.
		h.wait(t.Context(), "other", Call{Tenant: "other", Deadline: start.Add(50 * time.Millisecond)})
		h.mu.Lock()
		err = h.errs["other"]
		h.mu.Unlock()
		if err != nil {
			t.Fatalf("a call of another tenant, next but one under round robin, with 50ms left: %v, want it to wait", err)
		}
		h.run(2)
		if got := h.order[len(h.order)-1]; got != "other" {
			t.Fatalf("went: %v, want other second", h.order)
		}
		// A critical call jumps the line but its deadline passes while
		// the one in flight runs for a long time.
		h.wait(t.Context(), "crit", Call{Tenant: "c", Band: Critical, Deadline: start.Add(100 * time.Millisecond)})
		time.Sleep(time.Second)
		synctest.Wait()
		h.mu.Lock()
		err = h.errs["crit"]
		h.mu.Unlock()
		if !errors.Is(err, ErrDeadline) {
			t.Fatalf("a waiting call past its deadline: %v, want ErrDeadline", err)
		}
		if st := h.g.Stats(); st.Waiting != 9 {
			t.Errorf("%d waiting, want the 9 still in line", st.Waiting)
		}
		h.run(9)
	})
}

// Full: a more critical call sheds the least critical one waiting (from
// the tenant holding the most of the queue); with none less critical,
// the newcomer is refused. A caller that leaves frees its place.
func TestGateFullShedsSheddableFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 1, GateOptions{MaxWaiting: 3})
		if err := h.g.Acquire(t.Context(), Call{}); err != nil {
			t.Fatal(err)
		}
		h.wait(t.Context(), "x1", Call{Tenant: "x", Band: Sheddable})
		h.wait(t.Context(), "x2", Call{Tenant: "x", Band: Sheddable})
		h.wait(t.Context(), "y1", Call{Tenant: "y", Band: Sheddable})
		h.wait(t.Context(), "c1", Call{Tenant: "c", Band: Critical})
		h.mu.Lock()
		if !errors.Is(h.errs["x2"], ErrShed) {
			t.Errorf("x2: %v, want shed for the critical call", h.errs["x2"])
		}
		h.mu.Unlock()
		if err := h.g.Acquire(t.Context(), Call{Tenant: "z", Band: Sheddable}); !errors.Is(err, ErrFull) {
			t.Errorf("a sheddable call into a full gate: %v, want ErrFull", err)
		}
		leave, bye := context.WithCancel(t.Context())
		h.g.Done(0) // c1 goes
		synctest.Wait()
		h.wait(leave, "gone", Call{Tenant: "g", Band: Standard})
		bye()
		synctest.Wait()
		if st := h.g.Stats(); st.Waiting != 2 {
			t.Errorf("%d waiting after a caller left, want 2", st.Waiting)
		}
		if got := fmt.Sprint(h.run(3)); got != "[c1 x1 y1]" {
			t.Errorf("order %s", got)
		}
	})
}

// A caller with a deadline that leaves before it: its deadline passing
// later touches nothing (it once removed the call a second time and
// crashed the process).
func TestGateLeaverWithDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 1, GateOptions{})
		if err := h.g.Acquire(t.Context(), Call{}); err != nil {
			t.Fatal(err)
		}
		leave, bye := context.WithCancel(t.Context())
		h.wait(leave, "gone", Call{Tenant: "g", Deadline: time.Now().Add(time.Second)})
		h.wait(t.Context(), "stays", Call{Tenant: "s"})
		bye()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := fmt.Sprint(h.run(1)); got != "[stays]" {
			t.Errorf("order %s, want [stays]", got)
		}
	})
}

// While critical calls come, the other bands leave one slot of the
// capacity to them: a critical call goes at once, beside the running
// call, instead of queueing behind one more at the replica.
func TestGateKeepsASlotForCritical(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 2, GateOptions{})
		if err := h.g.Acquire(t.Context(), Call{Band: Critical}); err != nil {
			t.Fatal(err)
		}
		h.g.Done(time.Millisecond)
		if err := h.g.Acquire(t.Context(), Call{Tenant: "s", Band: Standard}); err != nil {
			t.Fatal(err)
		}
		h.wait(t.Context(), "s2", Call{Tenant: "s", Band: Standard})
		if st := h.g.Stats(); st.InFlight != 1 || st.Waiting != 1 {
			t.Fatalf("in flight %d, waiting %d: want the standard calls held to 1 of 2", st.InFlight, st.Waiting)
		}
		h.wait(t.Context(), "c", Call{Tenant: "c", Band: Critical})
		h.mu.Lock()
		got := fmt.Sprint(h.order)
		h.mu.Unlock()
		if got != "[c]" {
			t.Errorf("went %s, want the critical call at once", got)
		}
	})
}

// Once critical calls stop, the slot kept for them is given back within
// about the next hundred calls, however they went (at once or after
// waiting).
func TestGateGivesTheCriticalSlotBack(t *testing.T) {
	g := NewGate(GateOptions{Capacity: func() int { return 2 }})
	if err := g.Acquire(t.Context(), Call{Band: Critical}); err != nil {
		t.Fatal(err)
	}
	g.Done(time.Millisecond)
	for range 200 {
		if !g.TryAcquire(Call{Band: Standard}) {
			t.Fatal("a lone standard call did not pass")
		}
		g.Done(time.Millisecond)
	}
	if !g.TryAcquire(Call{Band: Standard}) || !g.TryAcquire(Call{Band: Standard}) {
		t.Error("two standard calls do not fit a capacity of 2 long after the last critical call")
	}
}
