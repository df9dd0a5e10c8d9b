package batcher

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/infergate/infergate/proto/methods"
)

// The upstream's max_batch_size caps merged rows whatever MaxSize says: 20
// one-row calls to a model capped at 8 go in batches of at most 8, and a
// request of 8 rows or more goes alone.
func TestLimitCapsMergedRows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Static, MaxSize: 32, MaxDelay: 10 * time.Millisecond})
		h.b.SetLimits(map[string]Limits{"m": {MaxBatchSize: 8}})
		var outs []<-chan outcome
		for i := range 20 {
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), nil))
		}
		for _, ch := range outs {
			if o := <-ch; o.err != nil || o.res.BatchSize > 8 {
				t.Fatalf("outcome %+v, want a batch of at most 8", o)
			}
		}
		for _, c := range h.up.received() {
			if ids, ok := strings.CutPrefix(c.req, "batch "); ok && len(strings.Split(ids, ",")) > 8 {
				t.Errorf("upstream got a batch of %d rows: %s", len(strings.Split(ids, ",")), c.req)
			}
		}
		if _, err := h.do(t.Context(), "a 8 big", nil); err != ErrNotBatched {
			t.Errorf("a request of 8 rows: %v, want it sent alone (ErrNotBatched)", err)
		}
		if p := h.b.Policies()["m"]; p.MaxSize != 8 {
			t.Errorf("policy max size %d, want the cap 8", p.MaxSize)
		}
	})
}

// With Auto, the models the upstream batches are batched, with its hints,
// and leave when the upstream unloads them; configured models stay; a
// model that takes no batch is never merged.
func TestAutoModelsFollowTheUpstream(t *testing.T) {
	b, err := New(Config{Models: map[string]Policy{"m": {Mode: Static}}, Auto: &Policy{Mode: Static}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const infer = methods.ModelInfer
	if b.Handles(infer, "resnet50") {
		t.Fatal("resnet50 batched before the upstream said so")
	}
	b.SetLimits(map[string]Limits{
		"resnet50": {MaxBatchSize: 64, PreferredSizes: []int{4, 8, 128}, MaxQueueDelay: 100 * time.Microsecond},
		"bert":     {MaxBatchSize: 0},
		"m":        {MaxBatchSize: 0},
	})
	if !b.Handles(infer, "resnet50") || b.Handles(infer, "bert") {
		t.Fatalf("after discovery: resnet50 %v, bert %v; want only resnet50", b.Handles(infer, "resnet50"), b.Handles(infer, "bert"))
	}
	p := b.Policies()["resnet50"]
	if p.MaxSize != 32 || fmt.Sprint(p.PreferredSizes) != "[4 8]" || p.MaxDelay != 100*time.Microsecond {
		t.Errorf("resnet50's policy %+v, want max 32 (policy < cap 64), preferred [4 8], delay 100µs", p)
	}
	if p := b.Policies()["m"]; p.MaxSize != 1 {
		t.Errorf("configured m, which takes no batch: max size %d, want 1 (never merged)", p.MaxSize)
	}
	b.SetLimits(map[string]Limits{"m": {MaxBatchSize: 4}})
	if b.Handles(infer, "resnet50") || !b.Handles(infer, "m") {
		t.Errorf("after resnet50 was unloaded: resnet50 %v, m %v", b.Handles(infer, "resnet50"), b.Handles(infer, "m"))
	}
	if p := b.Policies()["m"]; p.MaxSize != 4 {
		t.Errorf("m reloaded with max_batch_size 4: max size %d", p.MaxSize)
	}
}
