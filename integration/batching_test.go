package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// classifierRequest is a resnet50-style request of n rows whose values
// depend on seed, so every caller's answer is its own.
func classifierRequest(model string, n, seed int) *kservepb.ModelInferRequest {
	r := resnetRequest(model, n)
	r.Id = fmt.Sprintf("req-%d", seed)
	r.RawInputContents[0] = fp32Raw(seq(n*64, func(i int) float32 { return float32((i*7+seed*13)%29) / 29 }))
	return r
}

// classifierPredict is the same for TF-Serving's Predict.
func classifierPredict(model string, n, seed int) *tfservingpb.PredictRequest {
	return &tfservingpb.PredictRequest{
		ModelSpec: &tfservingpb.ModelSpec{Name: model},
		Inputs: map[string]*tensorflowpb.TensorProto{"input": {
			Dtype: tensorflowpb.DataType_DT_FLOAT,
			TensorShape: &tensorflowpb.TensorShapeProto{Dim: []*tensorflowpb.TensorShapeProto_Dim{
				{Size: int64(n)}, {Size: 64}}},
			FloatVal: seq(n*64, func(i int) float32 { return float32((i*5+seed*11)%31) / 31 }),
		}},
	}
}

// TestBatchingThroughProxy: 32 concurrent callers per protocol through
// infergate with adaptive batching each get exactly the answer simserver
// gives them directly, batches of more than one request were formed, and a
// malformed request among them reaches simserver alone and gets
// simserver's own status, message and trailers, exactly as direct.
func TestBatchingThroughProxy(t *testing.T) {
	e := newEnv(t, "--batching", "adaptive", "--batch-models", "resnet50", "--batch-max-size", "64")
	direct, via := dial(t, e.sim.grpc), dial(t, e.gate.grpc)
	dk, vk := kservepb.NewGRPCInferenceServiceClient(direct), kservepb.NewGRPCInferenceServiceClient(via)
	dt, vt := tfservingpb.NewPredictionServiceClient(direct), tfservingpb.NewPredictionServiceClient(via)
	ctx := testCtx(t)

	const callers = 32
	kreqs := make([]*kservepb.ModelInferRequest, callers)
	treqs := make([]*tfservingpb.PredictRequest, callers)
	kwant := make([]*kservepb.ModelInferResponse, callers)
	twant := make([]*tfservingpb.PredictResponse, callers)
	for i := range callers {
		rows := 1 + i%3
		kreqs[i], treqs[i] = classifierRequest("resnet50", rows, i), classifierPredict("resnet50", rows, i)
		var err error
		if kwant[i], err = dk.ModelInfer(ctx, kreqs[i]); err != nil {
			t.Fatalf("direct kserve %d: %v", i, err)
		}
		if twant[i], err = dt.Predict(ctx, treqs[i]); err != nil {
			t.Fatalf("direct tf %d: %v", i, err)
		}
	}
	bad := classifierRequest("resnet50", 2, 99)
	bad.RawInputContents[0] = bad.RawInputContents[0][:64*4] // one row of data for a shape of two
	var badTrailer metadata.MD
	_, badDirect := dk.ModelInfer(metadata.AppendToOutgoingContext(ctx, "x-echo-req", "bad"), bad, grpc.Trailer(&badTrailer))
	if status.Code(badDirect) == codes.OK {
		t.Fatal("simserver accepted the malformed request")
	}

	for round := range 3 { // several rounds: the first may find the slot idle
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 2*callers+1)
		for i := range callers {
			wg.Go(func() {
				<-start
				got, err := vk.ModelInfer(ctx, kreqs[i])
				if err != nil {
					errs <- fmt.Errorf("round %d kserve %d: %v", round, i, err)
				} else if !proto.Equal(got, kwant[i]) {
					errs <- fmt.Errorf("round %d kserve %d: response differs from direct\n got %v\nwant %v", round, i, got, kwant[i])
				}
			})
			wg.Go(func() {
				<-start
				got, err := vt.Predict(ctx, treqs[i])
				if err != nil {
					errs <- fmt.Errorf("round %d tf %d: %v", round, i, err)
				} else if !proto.Equal(got, twant[i]) {
					errs <- fmt.Errorf("round %d tf %d: response differs from direct\n got %v\nwant %v", round, i, got, twant[i])
				}
			})
		}
		wg.Go(func() {
			<-start
			var trailer metadata.MD
			_, err := vk.ModelInfer(metadata.AppendToOutgoingContext(ctx, "x-echo-req", "bad"), bad, grpc.Trailer(&trailer))
			if status.Code(err) != status.Code(badDirect) || status.Convert(err).Message() != status.Convert(badDirect).Message() {
				errs <- fmt.Errorf("round %d malformed request: %v, want simserver's own %v", round, err, badDirect)
			}
			if got, want := trailer.Get("x-echo-req"), badTrailer.Get("x-echo-req"); !slices.Equal(got, want) {
				errs <- fmt.Errorf("round %d malformed request: trailer x-echo-req %q, want simserver's %q", round, got, want)
			}
		})
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			t.FailNow()
		}
	}

	fams := scrape(t, e.gate.admin)
	var batches, rows float64
	for _, m := range find(fams, "infergate_batch_size", map[string]string{"model": "resnet50"}) {
		batches += float64(m.GetHistogram().GetSampleCount())
		rows += m.GetHistogram().GetSampleSum()
	}
	total := 0
	for i := range callers {
		total += 1 + i%3
	}
	if want := float64(3 * 2 * total); rows != want { // every row of every caller, 3 rounds, 2 protocols
		t.Errorf("infergate_batch_size sum %v rows, want %v", rows, want)
	}
	if batches == 0 || rows/batches <= 1.5 {
		t.Errorf("%v batches for %v rows: want batches of more than one request", batches, rows)
	}
	if n := counterSum(fams, "infergate_batch_rejected_total", map[string]string{"model": "resnet50", "reason": "invalid"}); n != 3 {
		t.Errorf("infergate_batch_rejected_total{reason=invalid} = %v, want 3", n)
	}
	// The monitor publishes a slice once it rotates (every second or so).
	eventually(t, "a queue latency series for the batched calls", func() bool {
		_, ok := summaryQuantile(t, scrape(t, e.gate.admin), "infergate_queue_latency_seconds",
			map[string]string{"model": "resnet50", "method": "/inference.GRPCInferenceService/ModelInfer", "window": "1m", "code_class": "ok"}, 0.99)
		return ok
	})

	code, body := httpGet(t, "http://"+e.gate.admin+"/api/v1/batching")
	var api struct {
		Models []struct {
			Model  string `json:"model"`
			Mode   string `json:"mode"`
			Queues []struct {
				Method        string  `json:"method"`
				TargetSize    int     `json:"target_size"`
				LatencyA      float64 `json:"latency_a_seconds"`
				Batches       int     `json:"batches"`
				MeanBatchSize float64 `json:"mean_batch_size"`
			} `json:"queues"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(body), &api); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/batching: %d %v\n%s", code, err, body)
	}
	if len(api.Models) != 1 || api.Models[0].Model != "resnet50" || api.Models[0].Mode != "adaptive" || len(api.Models[0].Queues) != 2 {
		t.Fatalf("/api/v1/batching: %s", body)
	}
	for _, q := range api.Models[0].Queues {
		if q.Batches == 0 || q.TargetSize < 1 || q.LatencyA <= 0 {
			t.Errorf("queue %s: %+v, want batches, a target and a fitted latency", q.Method, q)
		}
	}
}

// TestBatchingMetadataAndErrors: headers and trailers of a batched call
// reach the caller, and an upstream error reaches every caller of the batch.
func TestBatchingMetadataAndErrors(t *testing.T) {
	e := newEnv(t, "--batching", "static", "--batch-models", "resnet50", "--batch-max-delay", "2ms")
	vk := kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc))
	ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-echo-tenant", "blue")
	var header metadata.MD
	if _, err := vk.ModelInfer(ctx, classifierRequest("resnet50", 1, 1), grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	if got := header.Get("x-echo-tenant"); len(got) != 1 || got[0] != "blue" {
		t.Errorf("header x-echo-tenant = %q, want the metadata every caller shares echoed back", got)
	}

	if code, body := httpDo(t, http.MethodPost, "http://"+e.sim.admin+"/api/v1/faults",
		`{"model":"resnet50","error_rate":1,"error_code":"UNAVAILABLE"}`); code != http.StatusOK {
		t.Fatalf("inject fault: %d %s", code, body)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := vk.ModelInfer(ctx, classifierRequest("resnet50", 1, i))
			if status.Code(err) != codes.Unavailable {
				t.Errorf("caller %d: %v, want the upstream's UNAVAILABLE", i, err)
			}
		})
	}
	wg.Wait()
}

// TestBatchingLoneCallAsSent: with adaptive batching on, a call that meets
// an idle queue goes upstream as it was sent, with metadata a batch would
// drop (a per-request id), and the caller gets simserver's direct answer.
func TestBatchingLoneCallAsSent(t *testing.T) {
	e := newEnv(t, "--batching", "adaptive", "--batch-models", "resnet50")
	dk := kservepb.NewGRPCInferenceServiceClient(dial(t, e.sim.grpc))
	vk := kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc))
	for i := range 3 {
		req := classifierRequest("resnet50", 1, i)
		want, err := dk.ModelInfer(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("call-%d", i)
		ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-echo-request-id", id)
		var header metadata.MD
		got, err := vk.ModelInfer(ctx, req, grpc.Header(&header))
		if err != nil || !proto.Equal(got, want) {
			t.Fatalf("call %d: %v %v, want the direct answer %v", i, got, err, want)
		}
		if h := header.Get("x-echo-request-id"); len(h) != 1 || h[0] != id {
			t.Errorf("call %d: header x-echo-request-id = %q, want %q: a lone call keeps all its metadata", i, h, id)
		}
	}
	fams := scrape(t, e.gate.admin)
	var batches, rows float64
	for _, m := range find(fams, "infergate_batch_size", map[string]string{"model": "resnet50"}) {
		batches += float64(m.GetHistogram().GetSampleCount())
		rows += m.GetHistogram().GetSampleSum()
	}
	if batches != 3 || rows != 3 {
		t.Errorf("infergate_batch_size: %v batches, %v rows; want 3 batches of one", batches, rows)
	}
}

// TestPromtoolCheckMetricsBatching lints /metrics with the batcher's
// metrics present.
func TestPromtoolCheckMetricsBatching(t *testing.T) {
	e := newEnv(t, "--batching", "adaptive", "--batch-models", "resnet50,mobilenet_v3")
	vk := kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc))
	ctx := testCtx(t)
	for i := range 4 {
		vk.ModelInfer(ctx, classifierRequest("resnet50", 1, i))
	}
	vk.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "resnet50"}) // invalid: no inputs
	promtoolClean(t, e.gate.admin, "infergate_batch_size", "infergate_batches_total", "infergate_batch_late_total",
		"infergate_batch_rejected_total", "infergate_batch_target_size", "infergate_batch_target_delay_seconds",
		"infergate_batch_queue_length")
}
