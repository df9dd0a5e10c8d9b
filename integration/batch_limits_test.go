package integration

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
)

// TestBatchModelsAutoRespectsMaxBatchSize: with --batch-models auto,
// infergate batches the models simserver's model configs say batch, and
// never merges more rows than a model's max_batch_size (simple: 8), though
// --batch-max-size says 32: 32 callers sending 1 to 3 rows for a while
// cause no rejection at the server (which refuses a batch over 8, as
// Triton does), and every answer equals the direct one.
func TestBatchModelsAutoRespectsMaxBatchSize(t *testing.T) {
	e := newEnv(t, "--batching", "adaptive", "--batch-models", "auto", "--batch-max-size", "32")
	direct, via := kservepb.NewGRPCInferenceServiceClient(dial(t, e.sim.grpc)), kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc))
	ctx := testCtx(t)

	// The discovery runs at start: simple is batched, capped at 8.
	type source struct {
		Model                string `json:"model"`
		MaxSize              int    `json:"max_size"`
		Auto                 bool   `json:"auto"`
		UpstreamMaxBatchSize int    `json:"upstream_max_batch_size"`
		Queues               []struct {
			Batches       uint64  `json:"batches"`
			MeanBatchSize float64 `json:"mean_batch_size"`
		} `json:"queues"`
	}
	batching := func() map[string]source {
		_, body := httpGet(t, "http://"+e.gate.admin+"/api/v1/batching")
		var doc struct{ Models []source }
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("/api/v1/batching: %v\n%s", err, body)
		}
		out := map[string]source{}
		for _, m := range doc.Models {
			out[m.Model] = m
		}
		return out
	}
	waitFor(t, 30*time.Second, "simple discovered", func() bool { _, ok := batching()["simple"]; return ok })
	if s := batching()["simple"]; !s.Auto || s.UpstreamMaxBatchSize != 8 || s.MaxSize != 8 {
		t.Errorf("simple on /api/v1/batching: %+v, want auto, the server's max_batch_size 8, max size 8", s)
	}
	if _, ok := batching()["half_plus_two"]; ok {
		t.Error("half_plus_two (TF-Serving only, no KServe config) is batched")
	}

	request := func(n, rows int) *kservepb.ModelInferRequest {
		r := simpleRequest(fmt.Sprint("req-", n))
		for i, in := range r.Inputs {
			in.Shape = []int64{int64(rows), 16}
			raw := r.RawInputContents[i]
			for range rows - 1 {
				r.RawInputContents[i] = append(r.RawInputContents[i], raw...)
			}
		}
		return r
	}
	const callers, rounds = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			for i := range rounds {
				req := request(c*rounds+i, 1+(c+i)%3)
				want, err := direct.ModelInfer(ctx, req)
				if err != nil {
					errs <- fmt.Errorf("direct: %v", err)
					return
				}
				got, err := via.ModelInfer(ctx, req)
				if err != nil {
					errs <- fmt.Errorf("through infergate: %v", err)
					return
				}
				if !proto.Equal(got, want) {
					errs <- fmt.Errorf("caller %d: answer differs from direct", c)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	merged := false
	for _, q := range batching()["simple"].Queues {
		merged = merged || (q.Batches > 0 && q.MeanBatchSize > 1)
	}
	if !merged {
		t.Errorf("no merged batch of simple: %+v; the test proves nothing", batching()["simple"])
	}
	if n := counterSum(scrape(t, e.sim.admin), "nv_inference_request_failure", map[string]string{"model": "simple"}); n != 0 {
		t.Errorf("simserver refused %v requests of simple: a merged batch exceeded its max_batch_size", n)
	}
}
