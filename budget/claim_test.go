package budget

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestClaimsAreLetInOneMessageAtATime: while the budget is spent, claims
// wait in order; as room comes they are let in while it has room for one
// more message as big as those seen, so a crowd of waiting uploads cannot
// each read a message before any counted it.
func TestClaimsAreLetInOneMessageAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1 << 20)
		ctx := context.Background()
		var first Claim
		if err := b.Admit(ctx, &first); err != nil {
			t.Fatal(err)
		}
		first.Hold(768 << 10)

		in := make(chan int, 3)
		claims := make([]Claim, 3)
		for i := range claims {
			go func() {
				if err := b.Admit(ctx, &claims[i]); err != nil {
					t.Errorf("claim %d: %v", i, err)
				}
				in <- i
			}()
			synctest.Wait() // queued in this order
		}
		if len(in) != 0 {
			t.Fatalf("%d claims let in while the budget was spent", len(in))
		}
		if st := b.Stats(); st.Waits != 3 || st.Held != 768<<10 {
			t.Fatalf("stats %+v, want 3 waits and the first request held", st)
		}

		first.Release()
		synctest.Wait()
		if got := <-in; got != 0 || len(in) != 0 {
			t.Fatalf("after the first released: claim %d let in and %d more, want claim 0 alone", got, len(in))
		}
		// Claim 0 reads a message as big as the last: no room for another.
		claims[0].Hold(768 << 10)
		synctest.Wait()
		if len(in) != 0 {
			t.Fatal("claim 1 let in beside a held 768 KiB of a 1 MiB budget")
		}
		claims[0].Release()
		synctest.Wait()
		if got := <-in; got != 1 {
			t.Fatalf("claim %d let in, want 1: first come, first served", got)
		}
		claims[1].Release() // ended before it read anything
		synctest.Wait()
		if got := <-in; got != 2 {
			t.Fatalf("claim %d let in, want 2", got)
		}
		claims[2].Release()
		if st := b.Stats(); st.Held != 0 || st.Refusals != 0 {
			t.Fatalf("at the end %+v, want nothing held or refused", st)
		}
	})
}

// TestClaimWaitEndsBeforeItsDeadline: a claim that gets no room is
// refused a little before its deadline with an *Error, so its client
// reads why; a cancelled one returns its context's error uncounted.
func TestClaimWaitEndsBeforeItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1 << 20)
		var hold Claim
		_ = b.Admit(context.Background(), &hold)
		hold.Hold(1 << 20)

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		var c Claim
		err := b.Admit(ctx, &c)
		var be *Error
		if !errors.As(err, &be) || be.Limit != 1<<20 {
			t.Fatalf("Admit: %v, want an *Error", err)
		}
		if waited := time.Since(start); waited >= time.Second || waited < 900*time.Millisecond {
			t.Errorf("refused after %v, want just before the 1s deadline", waited)
		}
		c.Release()

		cctx, ccancel := context.WithCancel(context.Background())
		go func() { time.Sleep(10 * time.Millisecond); ccancel() }()
		if err := b.Admit(cctx, &c); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Admit: %v", err)
		}
		c.Release()
		hold.Release()
		if st := b.Stats(); st.Refusals != 1 || st.Held != 0 || len(b.claims.waiting) != 0 || b.claims.unheld != 0 {
			t.Fatalf("stats %+v, queue %d, unheld %d: want one refusal and nothing left", st, len(b.claims.waiting), b.claims.unheld)
		}
	})
}
