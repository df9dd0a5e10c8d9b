package sim

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/infergate/infergate/proto/kservepb"
)

// noTailModels are the defaults without resnet50's random long tail, so
// latencies are exact.
func noTailModels() []ModelConfig {
	models := DefaultModels()
	for i := range models {
		models[i].Latency.TailProbability = 0
	}
	return models
}

func TestLatencyProfileDuration(t *testing.T) {
	resnet := LatencyProfile{BaseMS: 5, PerItemMS: 0.25}
	cases := []struct {
		name     string
		n        int
		slowdown float64
		tail     float64
		want     time.Duration
	}{
		{"batch 1", 1, 1, 1, 5250 * time.Microsecond},
		{"batch 8", 8, 1, 1, 7 * time.Millisecond},
		{"batch 64", 64, 1, 1, 21 * time.Millisecond},
		{"slowdown 1.5", 8, 1.5, 1, 10500 * time.Microsecond},
		{"tail x4", 8, 1, 4, 28 * time.Millisecond},
	}
	for _, tc := range cases {
		if got := resnet.Duration(tc.n, tc.slowdown, tc.tail); got != tc.want {
			t.Errorf("%s: Duration = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// recorder is a sleeper that records the simulated durations it is asked
// for and returns at once.
type recorder struct {
	mu sync.Mutex
	d  []time.Duration
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.d = append(r.d, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *recorder) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.d
	r.d = nil
	return d
}

func TestComputedLatencyThroughRPC(t *testing.T) {
	rec := &recorder{}
	h := start(t, Config{Models: noTailModels(), Sleep: rec.sleep})
	ctx := context.Background()
	if _, err := h.ks.ModelInfer(ctx, classifierKServe("resnet50", 8, seq(8*64, 0, 0.01))); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); !slices.Equal(got, []time.Duration{7 * time.Millisecond}) {
		t.Errorf("resnet50 N=8: slept %v, want [7ms]", got)
	}
	if _, err := h.srv.SetFault(Fault{Model: "resnet50", Slowdown: 1.5, DelayMS: 50}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.tf.Predict(ctx, classifierTF("resnet50", 8, seq(8*64, 0, 0.01))); err != nil {
		t.Fatal(err)
	}
	// Compute ×1.5, then the fixed delay.
	if got := rec.take(); !slices.Equal(got, []time.Duration{10500 * time.Microsecond, 50 * time.Millisecond}) {
		t.Errorf("resnet50 N=8 slowdown 1.5 delay 50: slept %v", got)
	}
	if _, err := h.ks.ModelInfer(ctx, classifierKServe("mobilenet_v3", 20, seq(20*64, 0, 0.01))); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); !slices.Equal(got, []time.Duration{2 * time.Millisecond}) {
		t.Errorf("mobilenet_v3 N=20: slept %v, want [2ms]", got)
	}
	// identity_fp32 never sleeps.
	if _, err := h.ks.ModelInfer(ctx, identityRequest(seq(4, 0, 1))); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("identity slept %v", got)
	}
}

func identityRequest(v []float32) *kservepb.ModelInferRequest {
	return &kservepb.ModelInferRequest{
		ModelName:        "identity_fp32",
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{int64(len(v))}}},
		RawInputContents: [][]byte{rawFloats(v)},
	}
}

func TestLongTail(t *testing.T) {
	rec := &recorder{}
	models := DefaultModels()
	models[2].Latency.TailProbability = 1 // resnet50: every execution is in the tail
	h := start(t, Config{Models: models, Sleep: rec.sleep, Seed: 7})
	for range 20 {
		if _, err := h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 1, seq(64, 0, 0.01))); err != nil {
			t.Fatal(err)
		}
	}
	base := 5250 * time.Microsecond
	for _, d := range rec.take() {
		if d < 4*base || d > 8*base {
			t.Errorf("tail execution %v outside [4,8]×%v", d, base)
		}
	}
}

// TestSlotsQueue runs concurrent requests under synctest's fake clock: a
// one-slot model finishes them one after another, a four-slot model four
// at a time.
func TestSlotsQueue(t *testing.T) {
	cases := []struct {
		model       string
		n, requests int
		pending     int64
		want        []time.Duration
	}{
		{"resnet50", 4, 4, 3, []time.Duration{6, 12, 18, 24}},
		{"mobilenet_v3", 20, 8, 4, []time.Duration{2, 2, 2, 2, 4, 4, 4, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, err := New(Config{Models: noTailModels(), SampleInterval: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				ks := &kserveService{s: srv}
				begin := time.Now()
				done := make([]time.Duration, tc.requests)
				var wg sync.WaitGroup
				for i := range tc.requests {
					wg.Go(func() {
						_, err := ks.ModelInfer(t.Context(), classifierKServe(tc.model, tc.n, seq(tc.n*64, 0, 0.01)))
						if err != nil {
							t.Error(err)
						}
						done[i] = time.Since(begin)
					})
				}
				synctest.Wait()
				if got := srv.models[tc.model].stats.pending.Load(); got != tc.pending {
					t.Errorf("pending = %d, want %d", got, tc.pending)
				}
				wg.Wait()
				slices.Sort(done)
				for i := range tc.want {
					tc.want[i] *= time.Millisecond
				}
				if !slices.Equal(done, tc.want) {
					t.Errorf("completion times %v, want %v", done, tc.want)
				}
				st := &srv.models[tc.model].stats
				if st.execCount.Load() != uint64(tc.requests) || st.inferenceCount.Load() != uint64(tc.requests*tc.n) {
					t.Errorf("exec %d inferences %d", st.execCount.Load(), st.inferenceCount.Load())
				}
			})
		})
	}
}

// TestOneExecutionAtOnce counts concurrent executions of resnet50 with a
// sleeper that blocks until the test releases it.
func TestOneExecutionAtOnce(t *testing.T) {
	var (
		mu             sync.Mutex
		active, maxAct int
	)
	entered := make(chan struct{})
	release := make(chan struct{})
	sleep := func(ctx context.Context, _ time.Duration) error {
		mu.Lock()
		active++
		maxAct = max(maxAct, active)
		mu.Unlock()
		entered <- struct{}{}
		<-release
		mu.Lock()
		active--
		mu.Unlock()
		return nil
	}
	h := start(t, Config{Sleep: sleep})
	const requests = 5
	errc := make(chan error, requests)
	for range requests {
		go func() {
			_, err := h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 1, seq(64, 0, 0.01)))
			errc <- err
		}()
	}
	for range requests {
		<-entered
		mu.Lock()
		if active != 1 {
			t.Errorf("%d executions at once", active)
		}
		mu.Unlock()
		release <- struct{}{}
	}
	for range requests {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxAct != 1 {
		t.Errorf("max concurrent executions = %d, want 1", maxAct)
	}
}

// TestTailKeyedByRow: an execution's long-tail draw depends on its first
// row's index, not on how many executions came before, so a run that
// batches meets the same slow executions as one that does not; and about
// TailProbability of the rows start a slow execution.
func TestTailKeyedByRow(t *testing.T) {
	newServer := func() (*Server, *model) {
		models := DefaultModels()
		models[2].Latency.TailProbability = 0.1
		s, err := New(Config{Models: models, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		return s, s.models["resnet50"]
	}
	s1, m1 := newServer()
	single := make([]float64, 10000)
	slow := 0
	for i := range single {
		single[i] = s1.tail(m1, 1)
		if single[i] != 1 {
			slow++
			if single[i] < 4 || single[i] > 8 {
				t.Fatalf("row %d: factor %v outside [4,8]", i, single[i])
			}
		}
	}
	if slow < 900 || slow > 1100 {
		t.Errorf("%d of 10000 executions slow, want about 1000", slow)
	}
	s2, m2 := newServer()
	for row, n := 0, 1; row+n <= len(single); row, n = row+n, n%3+1 {
		if got := s2.tail(m2, n); got != single[row] {
			t.Fatalf("batch of %d from row %d: factor %v, want %v as when row %d ran alone", n, row, got, single[row], row)
		}
	}
}
