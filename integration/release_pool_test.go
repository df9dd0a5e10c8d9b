package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proto/kservepb"
)

// TestReleaseBatchedPool: a release judged where calls are batched and
// spread over a pool of two replicas, with real processes. For 30 s both
// versions are alike (A/A): the release is not rolled back. Then version
// 2 computes 1.3x longer on both replicas and the release is rolled back.
// Every answer's version header names the version whose model answered
// (a batch holds one version's calls), and no call fails.
func TestReleaseBatchedPool(t *testing.T) {
	models := versionedDefaults(t)
	a, b := startSim(t, "--config", models), startSim(t, "--config", models)
	cfg := writeFile(t, "infergate.yaml", fmt.Sprintf(`upstreams:
  - name: pool
    endpoints: [%q, %q]
releases:
  - model: resnet50
    stable: {version: "1"}
    candidate: {version: "2"}
    weight: 20
`, a.grpc, b.grpc))
	gate := start(t, "infergate", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", cfg,
		"--batching", "adaptive", "--batch-models", "resnet50")

	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var calls, failed, mismatched atomic.Int64
	var firstErr atomic.Value
	// Two callers, one call every 10 ms each, a half period apart: 200
	// calls/s over two replicas, enough for batches to form at times.
	for i := range 2 {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 5 * time.Millisecond)
			tk := time.NewTicker(10 * time.Millisecond)
			defer tk.Stop()
			req := resnetRequest("resnet50", 1)
			for ctx.Err() == nil {
				var hd metadata.MD
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				resp, err := kc.ModelInfer(cctx, req, grpc.Header(&hd))
				ccancel()
				switch {
				case err != nil && ctx.Err() == nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				case err == nil:
					calls.Add(1)
					if v := hd.Get(grpcwire.HeaderVersion); len(v) != 1 || v[0] != resp.GetModelVersion() {
						mismatched.Add(1)
					}
				}
				select {
				case <-tk.C:
				case <-ctx.Done():
				}
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()

	time.Sleep(30 * time.Second) // A/A
	rs := releasesOf(t, gate.admin)
	if len(rs) != 1 || rs[0].State != "running" {
		t.Fatalf("after 30 s of identical versions, batched over a pool: %+v\nevidence %s", rs, rs[0].Evidence)
	}
	for _, s := range []*proc{a, b} {
		fault(t, s.admin, `{"model":"resnet50","version":"2","slowdown":1.3}`)
	}
	for start := time.Now(); ; time.Sleep(500 * time.Millisecond) {
		rs = releasesOf(t, gate.admin)
		if rs[0].State == "rolled_back" {
			break
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("the 1.3x slower candidate was not rolled back within 3 minutes: %+v\nevidence %s", rs, rs[0].Evidence)
		}
	}
	t.Logf("%s", rs[0].History[len(rs[0].History)-1].Reason)
	cancel()
	wg.Wait()
	if n := calls.Load(); n < 3000 || failed.Load() > 0 || mismatched.Load() > 0 {
		t.Errorf("%d calls answered, %d failed (first: %v), %d whose version header named another version than the answer's",
			n, failed.Load(), firstErr.Load(), mismatched.Load())
	}
}
