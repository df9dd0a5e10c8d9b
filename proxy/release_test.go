package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/examples/simserver/sim"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/release"
)

// The release tests run simserver in-process: a classifier "clf" served
// at versions 1 and 2 (and "clf_next", another model), computing at once.

func startSim(t testing.TB) (*sim.Server, string) {
	t.Helper()
	clf := func(name string) sim.ModelConfig {
		return sim.ModelConfig{Name: name, Kind: sim.KindClassifier, Protocols: []string{sim.ProtocolKServe},
			MaxBatch: 8, Versions: []string{"1", "2"},
			Inputs:  []sim.TensorSpec{{Name: "input", Datatype: "FP32", Dims: []int64{4}}},
			Outputs: []sim.TensorSpec{{Name: "probs", Datatype: "FP32", Dims: []int64{5}}}}
	}
	s, err := sim.New(sim.Config{Models: []sim.ModelConfig{clf("clf"), clf("clf_next")}, SampleInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(sim.ServerOptions()...)
	s.RegisterGRPC(gs)
	go func() { _ = gs.Serve(s.WrapListener(lis)) }()
	t.Cleanup(func() { gs.Stop(); _ = s.Close() })
	return s, lis.Addr().String()
}

// releaseEnv is simserver behind a proxy with the releases of specs.
type releaseEnv struct {
	sim *sim.Server
	set *release.Set
	p   *Proxy
	up  *Upstream
	kc  kservepb.GRPCInferenceServiceClient
}

func newReleaseEnv(t testing.TB, specs []release.Spec, opts ...Option) *releaseEnv {
	t.Helper()
	s, addr := startSim(t)
	set, err := release.New(specs)
	if err != nil {
		t.Fatal(err)
	}
	up, err := DialUpstream(addr, UpstreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(StaticDirector(up), append([]Option{WithReleases(set)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &releaseEnv{sim: s, set: set, p: p, up: up, kc: kservepb.NewGRPCInferenceServiceClient(dial(t, serveFront(t, p, p.NewServer())))}
}

// infer calls clf (version "" unless named) with input i and returns the
// answer and its HeaderVersion.
func (e *releaseEnv) infer(ctx context.Context, model, version string, i int) (*kservepb.ModelInferResponse, string, error) {
	in := make([]byte, 16)
	for k := range 4 {
		binary.LittleEndian.PutUint32(in[4*k:], math.Float32bits(float32((i*7+k*3)%11)))
	}
	var hdr metadata.MD
	resp, err := e.kc.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: model, ModelVersion: version,
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "input", Datatype: "FP32", Shape: []int64{1, 4}}},
		RawInputContents: [][]byte{in}}, grpc.Header(&hdr))
	v := ""
	if h := hdr.Get(grpcwire.HeaderVersion); len(h) > 0 {
		v = h[0]
	}
	return resp, v, err
}

func split(weight float64) release.Spec {
	return release.Spec{Model: "clf", Stable: release.Target{Version: "1"}, Candidate: release.Target{Version: "2"}, Weight: weight}
}

func TestReleaseWeightsAndHeader(t *testing.T) {
	e := newReleaseEnv(t, []release.Spec{split(30)})
	ctx := ctxT(t)
	const calls = 2000
	cand := 0
	for i := range calls {
		resp, v, err := e.infer(ctx, "clf", "", i)
		if err != nil {
			t.Fatal(err)
		}
		if v != resp.ModelVersion {
			t.Fatalf("call %d: header says version %q, the server answered %q", i, v, resp.ModelVersion)
		}
		if v == "2" {
			cand++
		}
	}
	if share := 100 * float64(cand) / calls; math.Abs(share-30) > 1 {
		t.Errorf("candidate got %.2f%% of %d calls, want 30 ± 1", share, calls)
	}
	if s := e.p.Stats(); s.Forwarded != 0 {
		t.Errorf("%d calls of a release forwarded as bytes, want all served", s.Forwarded)
	}
	// A model without a release is still forwarded as it was.
	if _, v, err := e.infer(ctx, "clf_next", "", 0); err != nil || v != "" {
		t.Fatalf("clf_next: %v, header %q", err, v)
	}
	if s := e.p.Stats(); !grpcPathOnly && s.Forwarded != 1 {
		t.Errorf("a call of a model without a release: forwarded %d, want 1", s.Forwarded)
	}
}

func TestReleaseNamedVersionKept(t *testing.T) {
	e := newReleaseEnv(t, []release.Spec{split(100)})
	for i := range 50 {
		resp, v, err := e.infer(ctx(t), "clf", "1", i)
		if err != nil || resp.ModelVersion != "1" || v != "" {
			t.Fatalf("named version 1: %v, answered %q, header %q", err, resp.GetModelVersion(), v)
		}
	}
}

func ctx(t *testing.T) context.Context { return ctxT(t) }

func TestReleaseSticky(t *testing.T) {
	sp := split(50)
	sp.Sticky = "x-user"
	e := newReleaseEnv(t, []release.Spec{sp})
	seen := map[string]int{}
	for u := range 60 {
		user := fmt.Sprintf("user-%d", u)
		got := ""
		for i := range 10 {
			c := metadata.AppendToOutgoingContext(ctx(t), "x-user", user)
			_, v, err := e.infer(c, "clf", "", i)
			if err != nil {
				t.Fatal(err)
			}
			if got != "" && v != got {
				t.Fatalf("%s moved from version %s to %s", user, got, v)
			}
			got = v
		}
		seen[got]++
	}
	if seen["1"] == 0 || seen["2"] == 0 {
		t.Errorf("users per version %v: want both", seen)
	}
}

// Weight 99 (100 without steps is promoted at once): all but a call in a
// hundred go to the candidate.
func TestReleaseCandidateFailsStableAnswers(t *testing.T) {
	e := newReleaseEnv(t, []release.Spec{split(99)})
	if _, err := e.sim.SetFault(sim.Fault{Model: "clf", Version: "2", ErrorRate: 1, ErrorCode: "unavailable"}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		resp, v, err := e.infer(ctx(t), "clf", "", i)
		if err != nil || v != "1" || resp.ModelVersion != "1" {
			t.Fatalf("candidate unavailable: %v, header %q, answered %q; want the stable answer", err, v, resp.GetModelVersion())
		}
	}
	if st := e.set.Status()[0].State; st != release.Running {
		t.Errorf("state %v after UNAVAILABLE, want running (the judgement decides)", st)
	}
}

func TestReleaseCandidateNotFoundRollsBack(t *testing.T) {
	sp := split(99)
	sp.Candidate.Version = "3" // not on the server
	e := newReleaseEnv(t, []release.Spec{sp})
	resp, v, err := e.infer(ctx(t), "clf", "", 0)
	if err != nil || v != "1" || resp.ModelVersion != "1" {
		t.Fatalf("candidate not found: %v, header %q, answered %q; want the stable answer", err, v, resp.GetModelVersion())
	}
	if st := e.set.Status()[0].State; st != release.RolledBack {
		t.Fatalf("state %v, want rolled back", st)
	}
	if _, v, _ := e.infer(ctx(t), "clf", "", 1); v != "1" {
		t.Errorf("after the rollback: version %q, want 1", v)
	}
}

func TestReleaseBatchHoldsOneVersion(t *testing.T) {
	bat, err := batcher.New(batcher.Config{Models: map[string]batcher.Policy{
		"clf": {Mode: batcher.Static, MaxSize: 8, MaxDelay: 2 * time.Millisecond},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bat.Close() })
	e := newReleaseEnv(t, []release.Spec{split(50)}, WithBatcher(bat))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			resp, v, err := e.infer(ctx(t), "clf", "", i)
			if err == nil && (v == "" || v != resp.ModelVersion) {
				err = fmt.Errorf("header says version %q, the batch answered %q", v, resp.ModelVersion)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func shadowSpec(target release.Target) release.Spec {
	sp := split(0)
	sp.Shadow = &release.Shadow{Target: target, Fraction: 1, Compare: release.CompareTop1}
	return sp
}

func TestReleaseShadowAgreement(t *testing.T) {
	e := newReleaseEnv(t, []release.Spec{shadowSpec(release.Target{})})
	if _, err := e.sim.SetFault(sim.Fault{Model: "clf", Version: "2", FlipRate: 0.2}); err != nil {
		t.Fatal(err)
	}
	const calls = 500
	for i := range calls {
		resp, v, err := e.infer(ctx(t), "clf", "", i)
		if err != nil || v != "1" || resp.ModelVersion != "1" {
			t.Fatalf("client with a shadow: %v, header %q, answered %q; want only the stable answer", err, v, resp.GetModelVersion())
		}
	}
	e.p.shadows.Wait()
	e.set.Judge(time.Now())
	ag := e.set.Status()[0].Evidence.Agreement
	if ag == nil || ag.Pairs != calls {
		t.Fatalf("agreement %+v, want %d pairs", ag, calls)
	}
	if math.Abs(ag.Agree-0.8) > 0.02 {
		t.Errorf("agreement %.3f, want 0.80 ± 0.02 (flip rate 0.2)", ag.Agree)
	}
	if s := e.p.Stats(); s.ShadowCompared != calls || s.ShadowSkipped != 0 {
		t.Errorf("compared %d, skipped %d; want %d, 0", s.ShadowCompared, s.ShadowSkipped, calls)
	}
}

func TestReleaseShadowSkippedWhenGateFull(t *testing.T) {
	e := newReleaseEnv(t, []release.Spec{shadowSpec(release.Target{Model: "clf_next"})})
	e.p.SetFlowControl(FlowSettings{Enabled: true})
	cfg := e.p.flow.on()
	g := e.up.gate(cfg, "clf_next")
	for g.TryAcquire(cfg.flowCall(nil, nil, nil, time.Time{})) {
	}
	for i := range 10 {
		if _, v, err := e.infer(ctx(t), "clf", "", i); err != nil || v != "1" {
			t.Fatalf("%v, header %q", err, v)
		}
	}
	e.p.shadows.Wait()
	if s := e.p.Stats(); s.ShadowSkipped != 10 || s.ShadowCompared != 0 {
		t.Errorf("candidate's gate full: skipped %d, compared %d; want 10, 0", s.ShadowSkipped, s.ShadowCompared)
	}
}

func TestRowsClassName(t *testing.T) {
	for rows, want := range map[int64]string{1: "1 row", 2: "2-3 rows", 3: "2-3 rows", 4: "4-7 rows", 64: "64-127 rows", 1000: "128+ rows"} {
		if got := RowsClassName(min(sizeClass(rows), release.MaxClasses-1)); got != want {
			t.Errorf("%d rows: %q, want %q", rows, got, want)
		}
	}
}

// BenchmarkReleaseCall is the cost of a call of a model with a release
// (split, rewrite, header, observation), against one without, on the
// same server.
func BenchmarkReleaseCall(b *testing.B) {
	for _, model := range []string{"clf_next", "clf"} {
		b.Run(model, func(b *testing.B) {
			e := newReleaseEnv(b, []release.Spec{split(50)})
			ctx := b.Context()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, _, err := e.infer(ctx, model, "", i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
