package sim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// versionedModels are the default models with resnet50 served as versions
// 1 and 2, without its random tail (the test compares compute times).
func versionedModels() []ModelConfig {
	ms := DefaultModels()
	for i := range ms {
		if ms[i].Name == "resnet50" {
			ms[i].Versions = []string{"1", "2"}
			ms[i].Latency.TailProbability = 0
		}
	}
	return ms
}

// TestVersionsServedSideBySide: a model with two versions answers both
// (the default is the highest), says so in its metadata, refuses others,
// and a fault with a version touches only that version.
func TestVersionsServedSideBySide(t *testing.T) {
	var mu sync.Mutex
	var slept []time.Duration
	h := start(t, Config{Models: versionedModels(), Sleep: func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		slept = append(slept, d)
		mu.Unlock()
		return ctx.Err()
	}})
	ctx := context.Background()
	infer := func(version string) (string, time.Duration, error) {
		req := classifierKServe("resnet50", 1, seq(64, 0, 1))
		req.ModelVersion = version
		mu.Lock()
		slept = slept[:0]
		mu.Unlock()
		resp, err := h.ks.ModelInfer(ctx, req)
		mu.Lock()
		defer mu.Unlock()
		var d time.Duration
		if len(slept) > 0 {
			d = slept[0]
		}
		return resp.GetModelVersion(), d, err
	}

	meta, err := h.ks.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: "resnet50"})
	if err != nil || !slices.Equal(meta.Versions, []string{"1", "2"}) {
		t.Fatalf("metadata versions = %v, %v; want [1 2]", meta.GetVersions(), err)
	}
	for asked, want := range map[string]string{"1": "1", "2": "2", "": "2"} {
		if got, _, err := infer(asked); err != nil || got != want {
			t.Errorf("version %q answered as %q, %v; want %q", asked, got, err, want)
		}
	}
	_, _, err = infer("3")
	wantCode(t, err, codes.NotFound, "version 3 is not found")
	// TF-Serving asks for versions by number.
	preq := classifierTF("resnet50", 1, seq(64, 0, 1))
	preq.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(2)}
	if resp, err := h.tf.Predict(ctx, preq); err != nil || resp.ModelSpec.GetVersion().GetValue() != 2 {
		t.Errorf("Predict version 2: %v, answered by %v", err, resp.GetModelSpec().GetVersion())
	}
	preq.ModelSpec.VersionChoice = nil
	if resp, err := h.tf.Predict(ctx, preq); err != nil || resp.ModelSpec.GetVersion().GetValue() != 2 {
		t.Errorf("Predict latest: %v, answered by %v; want 2", err, resp.GetModelSpec().GetVersion())
	}
	preq.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(1)}
	if resp, err := h.tf.Predict(ctx, preq); err != nil || resp.ModelSpec.GetVersion().GetValue() != 1 {
		t.Errorf("Predict version 1: %v, answered by %v", err, resp.GetModelSpec().GetVersion())
	}
	preq.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(3)}
	_, err = h.tf.Predict(ctx, preq)
	wantCode(t, err, codes.NotFound, "Specific(resnet50, 3)")

	// A slow canary: version 2 three times as slow, version 1 untouched.
	_, base, _ := infer("1")
	if _, err := h.srv.SetFault(Fault{Model: "resnet50", Version: "2", Slowdown: 3}); err != nil {
		t.Fatal(err)
	}
	_, d1, _ := infer("1")
	_, d2, _ := infer("2")
	_, dDefault, _ := infer("")
	if base == 0 || d1 != base || d2 != 3*base || dDefault != d2 {
		t.Errorf("compute: version 1 %v (before the fault %v), version 2 %v, default %v; want 2 and the default at 3x", d1, base, d2, dDefault)
	}
	// Errors likewise.
	if _, err := h.srv.SetFault(Fault{Model: "resnet50", Version: "1", ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	_, _, err = infer("1")
	wantCode(t, err, codes.Internal, "injected")
	if _, _, err := infer("2"); err != nil {
		t.Errorf("version 2 under version 1's fault: %v", err)
	}
}

func TestVersionFaultAndConfigErrors(t *testing.T) {
	h := start(t, Config{Models: versionedModels()})
	for _, tc := range []struct {
		f    Fault
		want string
	}{
		{Fault{Model: "resnet50", Version: "3"}, `version: model "resnet50" does not serve version "3"`},
		{Fault{Version: "1"}, "version: needs a model"},
		{Fault{Model: "mobilenet_v3", Version: "2"}, `does not serve version "2"`},
	} {
		_, err := h.srv.SetFault(tc.f)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "version" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetFault(%+v) = %v, want a version error with %q", tc.f, err, tc.want)
		}
	}
	for _, vs := range [][]string{{"1", "1"}, {"01"}, {"0"}, {"v2"}} {
		ms := DefaultModels()
		ms[0].Versions = vs
		if err := ms[0].Validate(); err == nil || !strings.Contains(err.Error(), "versions[") {
			t.Errorf("versions %q: %v, want an error naming versions[i]", vs, err)
		}
	}
}
