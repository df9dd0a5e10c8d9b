package batcher

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher/merge"
	"github.com/infergate/infergate/proto/methods"
)

// nonIdempotentHarness is newHarness for model "m" listed in
// Config.NonIdempotent.
func nonIdempotentHarness(t *testing.T, p Policy) *harness {
	t.Helper()
	b, err := New(Config{Models: map[string]Policy{"m": p}, NonIdempotent: map[string]bool{"m": true}}, WithCodec(methods.ModelInfer, newFakeCodec()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &harness{t: t, b: b, up: &fakeUpstream{}}
}

// serverCalls counts, per caller's request id, how many upstream calls
// carried it, batched or alone.
func serverCalls(h *harness) map[string]int {
	n := map[string]int{}
	for _, c := range h.up.received() {
		ids := strings.TrimPrefix(c.req, "batch ")
		if ids == c.req {
			ids = strings.Fields(c.req)[2]
		}
		for _, id := range strings.Split(ids, ",") {
			n[id]++
		}
	}
	return n
}

// Issue 21: a model whose route says idempotent: false, batched with
// retry_unbatched, an upstream failing half the batches: no call reaches
// the server twice (before, each call of a failed batch was sent again).
func TestNonIdempotentNeverResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := nonIdempotentHarness(t, Policy{Mode: Adaptive, MaxSize: 4, RetryUnbatched: true})
		if p := h.b.Policies()["m"]; p.RetryUnbatched {
			t.Error("Policies says retry_unbatched for a model that is not idempotent")
		}
		var mu sync.Mutex
		batches := 0
		h.up.fail = func(req string) error {
			mu.Lock()
			defer mu.Unlock()
			if batches++; batches%2 == 0 {
				return status.Error(codes.Unavailable, "half of the calls fail")
			}
			return nil
		}
		const n = 200
		var outs []<-chan outcome
		for i := range n {
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), nil))
		}
		failed := 0
		for _, ch := range outs {
			if o := <-ch; o.err != nil {
				failed++
			}
		}
		calls := serverCalls(h)
		if len(calls) != n {
			t.Errorf("%d calls reached the server, want %d", len(calls), n)
		}
		for id, k := range calls {
			if k > 1 {
				t.Errorf("call %s reached the server %d times", id, k)
			}
		}
		if failed == 0 || failed == n {
			t.Errorf("%d of %d calls failed; the fake fails half of the upstream calls", failed, n)
		}
	})
}

// Nor after INVALID_ARGUMENT, nor when the answer cannot be split: those
// callers get the error (the split one INTERNAL's ErrSplit).
func TestNonIdempotentNoRetryPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(req string) error
		want func(error) bool
	}{
		{"invalid argument", func(req string) error {
			if strings.HasPrefix(req, "batch r") {
				return status.Error(codes.InvalidArgument, "one bad input")
			}
			return nil
		}, func(err error) bool { return status.Code(err) == codes.InvalidArgument }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := nonIdempotentHarness(t, Policy{Mode: Adaptive})
				h.up.fail = tc.fail
				outs, busy, release := startBatch(t, h, 3)
				release()
				<-busy
				for i, ch := range outs {
					if o := <-ch; !tc.want(o.err) {
						t.Errorf("call %d: %v", i, o.err)
					}
				}
				for id, k := range serverCalls(h) {
					if k > 1 {
						t.Errorf("call %s reached the server %d times", id, k)
					}
				}
			})
		})
	}
	t.Run("unsplittable answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, err := New(Config{Models: map[string]Policy{"m": {Mode: Adaptive}}, NonIdempotent: map[string]bool{"m": true}},
				WithCodec(methods.ModelInfer, splitFails{newFakeCodec()}))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			h := &harness{t: t, b: b, up: &fakeUpstream{}}
			outs, busy, release := startBatch(t, h, 3)
			release()
			<-busy
			for i, ch := range outs {
				if o := <-ch; o.err == nil || !strings.Contains(o.err.Error(), "not idempotent") || !errors.Is(o.err, merge.ErrSplit) {
					t.Errorf("call %d: %v, want ErrSplit, not sent again", i, o.err)
				}
			}
			for id, k := range serverCalls(h) {
				if k > 1 {
					t.Errorf("call %s reached the server %d times", id, k)
				}
			}
		})
	})
}

// splitFails is a codec whose batched answers cannot be split.
type splitFails struct{ *fakeCodec }

func (splitFails) Split([]byte, []*merge.Item) ([][]byte, error) {
	return nil, fmt.Errorf("fake: %w", merge.ErrSplit)
}
