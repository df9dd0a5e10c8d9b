package batcher

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher/merge"
	"github.com/infergate/infergate/proto/methods"
)

// startBatch queues n calls "a 1 r<i>" behind one busy call, so that they
// are sent as one batch when release is closed, and returns their outcomes
// and the busy call's.
func startBatch(t *testing.T, h *harness, n int) (outs []<-chan outcome, busy <-chan outcome, release func()) {
	t.Helper()
	release = h.up.hold()
	busy = h.goDo(t.Context(), "a 1 busy", nil)
	synctest.Wait()
	for i := range n {
		outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), nil))
		synctest.Wait()
	}
	return outs, busy, release
}

// TestUpstreamErrorToEveryCaller: the upstream's status for a batch, with
// its header and trailer, reaches every caller of the batch.
func TestUpstreamErrorToEveryCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		h.up.fail = func(req string) error {
			if strings.HasPrefix(req, "batch r") {
				return status.Error(codes.Unavailable, "model server overloaded")
			}
			return nil
		}
		outs, busy, release := startBatch(t, h, 3)
		release()
		<-busy
		for i, ch := range outs {
			o := <-ch
			if status.Code(o.err) != codes.Unavailable || status.Convert(o.err).Message() != "model server overloaded" {
				t.Errorf("call %d: %v, want the upstream's UNAVAILABLE unchanged", i, o.err)
			}
			if o.res.Header.Get("x-upstream")[0] != "yes" || o.res.Trailer.Get("x-trailer")[0] != "t" {
				t.Errorf("call %d: header %v trailer %v, want the upstream's", i, o.res.Header, o.res.Trailer)
			}
			if o.res.BatchSize != 3 {
				t.Errorf("call %d: batch size %d, want 3", i, o.res.BatchSize)
			}
		}
		if n := len(h.up.received()); n != 2 {
			t.Errorf("%d upstream calls, want 2 (no retries)", n)
		}
	})
}

// TestRetryUnbatched: with RetryUnbatched, a failed batch is retried one
// request at a time and each caller gets its own answer.
func TestRetryUnbatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, RetryUnbatched: true})
		h.up.fail = func(req string) error {
			if strings.HasPrefix(req, "batch r0,") {
				return status.Error(codes.Internal, "batch too large for GPU memory")
			}
			return nil
		}
		outs, busy, release := startBatch(t, h, 3)
		release()
		<-busy
		for i, ch := range outs {
			if o := <-ch; o.err != nil || string(o.res.Payload) != fmt.Sprintf("resp r%d", i) {
				t.Errorf("call %d: %q %v, want its own response", i, o.res.Payload, o.err)
			}
		}
		var reqs []string
		for _, c := range h.up.received() {
			reqs = append(reqs, c.req)
		}
		slices.Sort(reqs[2:])
		if want := []string{"a 1 busy", "batch r0,r1,r2", "a 1 r0", "a 1 r1", "a 1 r2"}; !slices.Equal(reqs, want) {
			t.Errorf("upstream got %q, want %q", reqs, want)
		}
	})
}

// TestMalformedRequestDoesNotPoisonItsBatch: a malformed request is not
// batched (the caller sends it alone, so the upstream answers it with its
// own status); the others are batched and answered.
func TestMalformedRequestDoesNotPoisonItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		outs, busy, release := startBatch(t, h, 3)
		if _, err := h.do(t.Context(), "bad", nil); !errors.Is(err, ErrNotBatched) {
			t.Fatalf("malformed request: %v, want ErrNotBatched", err)
		}
		release()
		<-busy
		for i, ch := range outs {
			if o := <-ch; o.err != nil || string(o.res.Payload) != fmt.Sprintf("resp r%d", i) || o.res.BatchSize != 3 {
				t.Errorf("call %d: %q size %d %v", i, o.res.Payload, o.res.BatchSize, o.err)
			}
		}
		if n := (*h.b.models.Load())["m"].rejected[reasonInvalid].Load(); n != 1 {
			t.Errorf("invalid rejections = %d, want 1", n)
		}
	})
}

// TestUpstreamInvalidArgumentRetriedAlone: when the upstream rejects a
// batch as invalid, each request is retried alone, so only the bad one
// fails.
func TestUpstreamInvalidArgumentRetriedAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		h.up.fail = func(req string) error {
			if strings.Contains(req, "r1") {
				return status.Error(codes.InvalidArgument, "unexpected value in r1")
			}
			return nil
		}
		outs, busy, release := startBatch(t, h, 3)
		release()
		<-busy
		for i, ch := range outs {
			o := <-ch
			if i == 1 {
				if status.Code(o.err) != codes.InvalidArgument {
					t.Errorf("bad call: %v, want INVALID_ARGUMENT", o.err)
				}
				continue
			}
			if o.err != nil || string(o.res.Payload) != fmt.Sprintf("resp r%d", i) {
				t.Errorf("call %d: %q %v, want its own response", i, o.res.Payload, o.err)
			}
		}
	})
}

// TestSplitFailure: when a batch's response does not split, each request
// is sent again alone and every caller gets the upstream's own answer.
func TestSplitFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		h.b.codecs[methods.ModelInfer] = splitBroken{h.b.codecs[methods.ModelInfer].(*fakeCodec)}
		outs, busy, release := startBatch(t, h, 2)
		release()
		if o := <-busy; o.err != nil {
			t.Fatalf("lone call, sent without split: %v", o.err)
		}
		for i, ch := range outs {
			o := <-ch
			if o.err != nil || string(o.res.Payload) != fmt.Sprintf("resp r%d", i) {
				t.Errorf("call %d: %q %v, want its own response from a call alone", i, o.res.Payload, o.err)
			}
		}
	})
}

type splitBroken struct{ *fakeCodec }

func (splitBroken) Split([]byte, []*merge.Item) ([][]byte, error) {
	return nil, fmt.Errorf("fake: 3 outputs for 2 items: %w", merge.ErrSplit)
}

// TestIncompatibleNotMerged: requests with different compatibility keys, or
// different credentials, go in different batches.
func TestIncompatibleNotMerged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, Slots: 1})
		release := h.up.hold()
		busy := h.goDo(t.Context(), "a 1 busy", nil)
		synctest.Wait()
		alice, bob := metadata.Pairs("authorization", "Bearer alice"), metadata.Pairs("authorization", "Bearer bob")
		var outs []<-chan outcome
		for _, p := range []struct {
			payload string
			md      metadata.MD
		}{{"a 1 a0", alice}, {"b 1 b0", alice}, {"a 1 a1", alice}, {"b 1 b1", alice}, {"a 1 x0", bob}} {
			outs = append(outs, h.goDo(t.Context(), p.payload, p.md))
			synctest.Wait()
		}
		release()
		<-busy
		for _, ch := range outs {
			if o := <-ch; o.err != nil {
				t.Fatal(o.err)
			}
		}
		var reqs []string
		for _, c := range h.up.received()[1:] {
			reqs = append(reqs, c.req)
		}
		slices.Sort(reqs)
		if want := []string{"a 1 x0", "batch a0,a1", "batch b0,b1"}; !slices.Equal(reqs, want) {
			t.Errorf("batches %q, want %q", reqs, want)
		}
	})
}

// TestMetadataCommonKeys: the merged call carries the keys whose values all
// callers share; keys that differ stay behind.
func TestMetadataCommonKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		release := h.up.hold()
		busy := h.goDo(t.Context(), "a 1 busy", nil)
		synctest.Wait()
		var outs []<-chan outcome
		for i := range 3 {
			md := metadata.Pairs("x-tenant", "t1", "x-request-id", fmt.Sprint(i), "authorization", "Bearer k")
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), md))
			synctest.Wait()
		}
		release()
		<-busy
		for _, ch := range outs {
			<-ch
		}
		got := h.up.received()[1].md
		want := metadata.Pairs("x-tenant", "t1", "authorization", "Bearer k")
		if len(got) != len(want) || got.Get("x-tenant")[0] != "t1" || got.Get("authorization")[0] != "Bearer k" {
			t.Errorf("batch metadata %v, want %v", got, want)
		}
	})
}

// TestPanicFailsOnlyItsBatch: a codec that panics in Merge fails the
// calls of that batch with ErrPanic, counts it, and the queue keeps
// serving: the next batch goes through.
func TestPanicFailsOnlyItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		pc := &mergePanics{fakeCodec: h.b.codecs[methods.ModelInfer].(*fakeCodec)}
		pc.armed.Store(true)
		h.b.codecs[methods.ModelInfer] = pc
		outs, busy, release := startBatch(t, h, 2)
		release()
		if o := <-busy; o.err != nil {
			t.Fatalf("lone call (no merge): %v", o.err)
		}
		for i, ch := range outs {
			if o := <-ch; !errors.Is(o.err, ErrPanic) {
				t.Errorf("call %d of the panicking batch: %v, want ErrPanic", i, o.err)
			}
		}
		if n := (*h.b.models.Load())["m"].rejected[reasonPanic].Load(); n != 1 {
			t.Errorf("panics counted: %d, want 1", n)
		}
		pc.armed.Store(false)
		outs, busy, release = startBatch(t, h, 2)
		release()
		<-busy
		for i, ch := range outs {
			if o := <-ch; o.err != nil {
				t.Errorf("call %d after the panic: %v", i, o.err)
			}
		}
	})
}

type mergePanics struct {
	*fakeCodec
	armed atomic.Bool
}

func (m *mergePanics) Merge(items []*merge.Item) ([]byte, error) {
	if m.armed.Load() {
		panic("fake merge bug")
	}
	return m.fakeCodec.Merge(items)
}
