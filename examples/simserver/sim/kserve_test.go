package sim

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/infergate/infergate/proto/kservepb"
)

func TestKServeServerAndModelRPCs(t *testing.T) {
	h := start(t, Config{})
	ctx := context.Background()

	live, err := h.ks.ServerLive(ctx, &kservepb.ServerLiveRequest{})
	if err != nil || !live.Live {
		t.Errorf("ServerLive = %v, %v", live, err)
	}
	ready, err := h.ks.ServerReady(ctx, &kservepb.ServerReadyRequest{})
	if err != nil || !ready.Ready {
		t.Errorf("ServerReady = %v, %v", ready, err)
	}
	meta, err := h.ks.ServerMetadata(ctx, &kservepb.ServerMetadataRequest{})
	if err != nil || meta.Name != "simserver" || meta.Version != Version || !slices.Contains(meta.Extensions, "statistics") {
		t.Errorf("ServerMetadata = %v, %v", meta, err)
	}
	for name, want := range map[string]bool{"simple": true, "resnet50": true, "half_plus_two": false, "nope": false} {
		r, err := h.ks.ModelReady(ctx, &kservepb.ModelReadyRequest{Name: name})
		if err != nil || r.Ready != want {
			t.Errorf("ModelReady(%s) = %v, %v", name, r, err)
		}
	}

	mm, err := h.ks.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: "simple"})
	if err != nil {
		t.Fatal(err)
	}
	if mm.Name != "simple" || !slices.Equal(mm.Versions, []string{"1"}) || len(mm.Inputs) != 2 ||
		mm.Inputs[1].Name != "INPUT1" || mm.Inputs[1].Datatype != "INT32" || !slices.Equal(mm.Inputs[1].Shape, []int64{-1, 16}) ||
		mm.Outputs[0].Name != "OUTPUT0" {
		t.Errorf("ModelMetadata = %v", mm)
	}
	_, err = h.ks.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: "nope"})
	wantCode(t, err, codes.NotFound, "Request for unknown model: 'nope' is not found")

	mc, err := h.ks.ModelConfig(ctx, &kservepb.ModelConfigRequest{Name: "resnet50"})
	if err != nil {
		t.Fatal(err)
	}
	c := mc.Config
	if c.MaxBatchSize != 64 || c.Input[0].DataType != kservepb.DataType_TYPE_FP32 || !slices.Equal(c.Input[0].Dims, []int64{64}) ||
		!slices.Equal(c.Output[0].Dims, []int64{10}) || c.InstanceGroup[0].Count != 1 || c.InstanceGroup[0].Kind != kservepb.ModelInstanceGroup_KIND_GPU ||
		c.GetDynamicBatching() != nil {
		t.Errorf("ModelConfig = %v", c)
	}

	idx, err := h.ks.RepositoryIndex(ctx, &kservepb.RepositoryIndexRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range idx.Models {
		names = append(names, m.Name)
		if m.State != "READY" || m.Version != "1" {
			t.Errorf("index entry %v", m)
		}
	}
	if !slices.Equal(names, []string{"simple", "resnet50", "mobilenet_v3", "identity_fp32", "llm_stream"}) {
		t.Errorf("RepositoryIndex = %v", names)
	}

	_, err = h.ks.RepositoryModelLoad(ctx, &kservepb.RepositoryModelLoadRequest{ModelName: "simple"})
	wantCode(t, err, codes.Unimplemented, "")

	hc, err := healthpb.NewHealthClient(h.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health = %v, %v", hc, err)
	}
}

func TestModelStatistics(t *testing.T) {
	h := start(t, Config{})
	ctx := context.Background()
	a, b := simpleInputs()
	for range 3 {
		if _, err := h.ks.ModelInfer(ctx, simpleRequest(a, b, true)); err != nil {
			t.Fatal(err)
		}
	}
	bad := simpleRequest(a, b, true)
	bad.Inputs[0].Datatype = "FP32"
	_, _ = h.ks.ModelInfer(ctx, bad)

	resp, err := h.ks.ModelStatistics(ctx, &kservepb.ModelStatisticsRequest{Name: "simple"})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.ModelStats[0]
	is := st.InferenceStats
	if st.Name != "simple" || st.Version != "1" || st.InferenceCount != 3 || st.ExecutionCount != 3 ||
		is.Success.Count != 3 || is.Fail.Count != 1 || is.Queue.Count != 3 || is.ComputeInfer.Count != 3 || st.LastInference == 0 {
		t.Errorf("statistics = %v", st)
	}
	all, err := h.ks.ModelStatistics(ctx, &kservepb.ModelStatisticsRequest{})
	if err != nil || len(all.ModelStats) != 5 {
		t.Errorf("all statistics: %d models, %v", len(all.GetModelStats()), err)
	}
	_, err = h.ks.ModelStatistics(ctx, &kservepb.ModelStatisticsRequest{Name: "simple", Version: "3"})
	wantCode(t, err, codes.NotFound, "version 3")
}
