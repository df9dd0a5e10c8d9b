package sim

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/infergate/infergate/proto/kservepb"
)

// TestModelsFileMatchesDefaults keeps examples/simserver/models.yaml, the
// documented starting point for custom models, equal to DefaultModels.
func TestModelsFileMatchesDefaults(t *testing.T) {
	got, err := LoadModels("../models.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultModels()
	if err := validateModels(want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("models.yaml differs from DefaultModels:\n got %+v\nwant %+v", got, want)
	}
}

func TestLoadModelsGood(t *testing.T) {
	models, err := LoadModels("testdata/models.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := models[0]
	if m.Platform != "simserver" || m.Latency.TailMinFactor != 4 || m.Latency.TailMaxFactor != 8 {
		t.Errorf("defaults not filled: %+v", m)
	}
	h := start(t, Config{Models: models})
	resp, err := h.ks.ModelConfig(context.Background(), &kservepb.ModelConfigRequest{Name: "bert"})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Config; c.MaxBatchSize != 32 || c.InstanceGroup[0].Count != 2 || c.Input[0].Dims[0] != 128 {
		t.Errorf("config = %v", c)
	}
}

func TestLoadModelsBad(t *testing.T) {
	cases := []struct {
		file string
		want []string
	}{
		{"models.bad-kind.yaml", []string{
			`sim: model "m1": kind: unknown kind "transformer" (want add_sub, half_plus_two, classifier, identity or token_stream)`,
		}},
		{"models.bad-fields.yaml", []string{
			`sim: model "m1": protocols: unknown protocol "grpc" (want kserve or tfserving)`,
			`sim: model "m1": slots: must be >= 0, got -1`,
			`sim: model "m1": latency.tail_probability: must be in [0,1], got 2`,
			`sim: model "m1": inputs[0]: datatype "FP16" not supported (want FP32 or INT32)`,
			`sim: model "m1": name: duplicated`,
		}},
		{"models.bad-unknown-key.yaml", []string{"field protocol not found"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			_, err := LoadModels("testdata/" + tc.file)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\nlacks %q", err, want)
				}
			}
		})
	}
	if _, err := New(Config{Models: []ModelConfig{{Name: "x", Kind: KindIdentity}}}); err == nil {
		t.Error("New accepted an invalid model")
	}
}
