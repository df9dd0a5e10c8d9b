package methods

import (
	"slices"
	"testing"

	"github.com/infergate/infergate/proto/wire"
)

// The table's answers that the proxy, alerts and batcher rely on: each of
// these was once answered differently in different packages.
func TestTable(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   Info
	}{
		{ModelInfer, Info{Known: true, Unary: true, Target: wire.KServeTarget, Inference: true, Inputs: wire.KServeTarget}},
		{ModelStreamInfer, Info{Known: true, Target: wire.KServeTarget, Inference: true}},
		{KServeService + "ModelMetadata", Info{Known: true, Unary: true, Target: wire.KServeTarget}},
		{KServeService + "ServerLive", Info{Known: true, Unary: true}},
		{Predict, Info{Known: true, Unary: true, Target: wire.TFServingTarget, Inference: true, Inputs: wire.TFServingTarget}},
		{TFServingService + "Classify", Info{Known: true, Unary: true, Target: wire.TFServingTarget, Inference: true}},
		{TFServingService + "MultiInference", Info{Known: true, Unary: true, Inference: true}},
		{GetModelMetadata, Info{Known: true, Unary: true, Target: wire.TFServingTarget}},
		{HealthCheck, Info{Known: true, Unary: true}},
		{"/grpc.health.v1.Health/Watch", Info{}},
		{"/custom.Service/Anything", Info{}},
	} {
		if got := Lookup(tc.method); got != tc.want {
			t.Errorf("Lookup(%q) = %+v, want %+v", tc.method, got, tc.want)
		}
		if got := IsInference(tc.method); got != tc.want.Inference {
			t.Errorf("IsInference(%q) = %v", tc.method, got)
		}
	}
}

func TestInferenceNames(t *testing.T) {
	want := []string{"ModelInfer", "ModelStreamInfer", "Predict", "Classify", "Regress", "MultiInference"}
	if got := InferenceNames(); !slices.Equal(got, want) {
		t.Fatalf("InferenceNames() = %v, want %v", got, want)
	}
	// A caller appending to the result must not write into the table's.
	_ = append(InferenceNames(), "x")
	if got := InferenceNames(); !slices.Equal(got, want) {
		t.Fatalf("after an append: %v", got)
	}
	if !IsInferenceName("Predict") || IsInferenceName("ModelMetadata") {
		t.Fatal("IsInferenceName disagrees with the table")
	}
	if Short(ModelInfer) != "ModelInfer" || Short("Bare") != "Bare" {
		t.Fatal("Short")
	}
}
