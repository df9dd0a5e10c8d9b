package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// argmaxRows returns the argmax (first of the largest) of each row of c
// values.
func argmaxRows(v []float32, c int) []int {
	out := make([]int, len(v)/c)
	for r := range out {
		row := v[r*c : (r+1)*c]
		for i, x := range row {
			if x > row[out[r]] {
				out[r] = i
			}
		}
	}
	return out
}

func TestFlipPerturbValidation(t *testing.T) {
	h := start(t, Config{})
	for _, tc := range []struct{ name, body, field string }{
		{"flip above 1", `{"model": "resnet50", "flip_rate": 1.01}`, "flip_rate"},
		{"flip negative", `{"model": "resnet50", "flip_rate": -0.1}`, "flip_rate"},
		{"flip wrong type", `{"model": "resnet50", "flip_rate": "half"}`, "flip_rate"},
		{"perturb negative", `{"model": "resnet50", "perturb": -0.01}`, "perturb"},
		{"perturb wrong type", `{"perturb": true}`, "perturb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, "POST", h.admin+"/api/v1/faults", tc.body)
			var e apiError
			if err := json.Unmarshal([]byte(body), &e); code != http.StatusBadRequest || err != nil {
				t.Fatalf("status = %d %s (%v), want 400", code, body, err)
			}
			if e.Field != tc.field || !strings.Contains(e.Error, tc.field) {
				t.Errorf("error = %+v, want field %q", e, tc.field)
			}
		})
	}
	// Values JSON cannot carry, through the Go API.
	for _, f := range []Fault{{Perturb: math.Inf(1)}, {Perturb: math.NaN()}, {FlipRate: math.NaN()}} {
		var fe *FieldError
		if _, err := h.srv.SetFault(f); !errors.As(err, &fe) || (fe.Field != "perturb" && fe.Field != "flip_rate") {
			t.Errorf("SetFault(%+v) = %v, want a flip_rate or perturb error", f, err)
		}
	}
	if len(h.srv.Faults()) != 0 {
		t.Fatalf("a bad fault was stored: %v", h.srv.Faults())
	}
	// A good one round-trips, and appears in the listing.
	code, body := do(t, "POST", h.admin+"/api/v1/faults", `{"model": "resnet50", "version": "1", "flip_rate": 0.03, "perturb": 0.001}`)
	if code != 200 || !strings.Contains(body, `"flip_rate": 0.03`) || !strings.Contains(body, `"perturb": 0.001`) {
		t.Fatalf("POST = %d %s", code, body)
	}
	if fs := h.srv.Faults(); len(fs) != 1 || fs[0].FlipRate != 0.03 || fs[0].Perturb != 0.001 {
		t.Errorf("Faults = %+v", fs)
	}
}

// TestFlipRateFraction: over 10,000 calls the fraction of flipped answers
// is the flip_rate to within half a point, every flipped answer has a new
// argmax on every row, and a second server with the same seed flips the
// same calls.
func TestFlipRateFraction(t *testing.T) {
	const calls = 10000
	ctx := context.Background()
	in := seq(2*64, -0.7, 0.013)
	run := func(rate float64) []bool {
		srv, err := New(Config{Sleep: instantSleep, SampleInterval: -1, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		base, err := srv.modelInfer(ctx, classifierKServe("mobilenet_v3", 2, in))
		if err != nil {
			t.Fatal(err)
		}
		want := argmaxRows(decodeFloats(base.RawOutputContents[0]), 10)
		if _, err := srv.SetFault(Fault{Model: "mobilenet_v3", FlipRate: rate}); err != nil {
			t.Fatal(err)
		}
		flipped := make([]bool, calls)
		for i := range flipped {
			resp, err := srv.modelInfer(ctx, classifierKServe("mobilenet_v3", 2, in))
			if err != nil {
				t.Fatal(err)
			}
			got := argmaxRows(decodeFloats(resp.RawOutputContents[0]), 10)
			flipped[i] = got[0] != want[0]
			if (got[1] != want[1]) != flipped[i] {
				t.Fatalf("rate %v call %d: rows flipped %v, want both or none (want %v)", rate, i, got, want)
			}
		}
		return flipped
	}
	for _, rate := range []float64{0.03, 0.5, 0.97} {
		flipped := run(rate)
		n := 0
		for _, f := range flipped {
			if f {
				n++
			}
		}
		if got := float64(n) / calls; math.Abs(got-rate) > 0.005 {
			t.Errorf("flip_rate %v: %d of %d calls flipped (%.4f)", rate, n, calls, got)
		}
		if rate == 0.03 && !slices.Equal(flipped, run(rate)) {
			t.Errorf("flip_rate %v: two servers with one seed flipped different calls", rate)
		}
	}
}

// TestFlipsSequence checks the flip draws alone, at rates and lengths the
// gRPC test cannot afford: the count among the first n calls stays within
// a few calls of rate·n.
func TestFlipsSequence(t *testing.T) {
	for _, rate := range []float64{0.001, 0.01, 0.03, 0.1, 0.2, 1.0 / 3, 0.5, 0.8, 0.99} {
		for _, seed := range []uint64{0, 1, 42} {
			f := &activeFault{Fault: Fault{FlipRate: rate}, seed: faultSeed(seed, "resnet50", "2")}
			n := 0
			for i := range uint64(100000) {
				if f.flips(i) {
					n++
				}
				if want := rate * float64(i+1); math.Abs(float64(n)-want) > 5 {
					t.Fatalf("rate %v seed %d: %d flips in %d calls, want %.1f", rate, seed, n, i+1, want)
				}
			}
		}
	}
	if (&activeFault{}).flips(0) || !(&activeFault{Fault: Fault{FlipRate: 1}}).flips(12345) {
		t.Error("flip_rate 0 flipped, or flip_rate 1 did not")
	}
}

// TestFlipRows: the top swaps with the runner-up (the largest value below
// it, ties included); an all-equal row, a one-element row and NaNs are
// handled.
func TestFlipRows(t *testing.T) {
	for _, tc := range []struct {
		shape   []int64
		in, out []float32
	}{
		{[]int64{2, 3}, []float32{0.1, 0.7, 0.2, 5, 5, 1}, []float32{0.1, 0.2, 0.7, 1, 5, 5}},
		{[]int64{4}, []float32{2, 2, 2, 2}, []float32{2, 2, 2, 2}},
		{[]int64{3, 1}, []float32{1, 2, 3}, []float32{1, 2, 3}},
		{[]int64{3}, []float32{float32(math.NaN()), 1, 3}, []float32{float32(math.NaN()), 3, 1}},
	} {
		raw := rawFloats(tc.in)
		flipRows(raw, tc.shape, false)
		if got := decodeFloats(raw); !slices.EqualFunc(got, tc.out, func(a, b float32) bool {
			return a == b || (a != a && b != b)
		}) {
			t.Errorf("flip %v %v = %v, want %v", tc.shape, tc.in, got, tc.out)
		}
	}
	raw := rawInt32s([]int32{-3, 9, 4, 9})
	flipRows(raw, []int64{1, 4}, true)
	if got := decodeInt32s(raw); !slices.Equal(got, []int32{-3, 4, 9, 9}) {
		t.Errorf("INT32 flip = %v", got)
	}
}

// TestPerturbBounds: every element moves by at most perturb·|x|, the noise
// uses most of that range, the answer keeps its shape and dtype, and an
// INT32 model's answer is perturbed too (rounded).
func TestPerturbBounds(t *testing.T) {
	h := start(t, Config{})
	ctx := context.Background()
	const n, p = 8, 0.05
	in := seq(n*64, -1, 0.004)
	base, err := h.ks.ModelInfer(ctx, classifierKServe("resnet50", n, in))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.SetFault(Fault{Model: "resnet50", Perturb: p}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.ks.ModelInfer(ctx, classifierKServe("resnet50", n, in))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Outputs[0].Shape, base.Outputs[0].Shape) || resp.Outputs[0].Datatype != "FP32" ||
		len(resp.RawOutputContents[0]) != len(base.RawOutputContents[0]) {
		t.Fatalf("perturbed answer %v %s %d bytes, want %v FP32 %d bytes", resp.Outputs[0].Shape, resp.Outputs[0].Datatype,
			len(resp.RawOutputContents[0]), base.Outputs[0].Shape, len(base.RawOutputContents[0]))
	}
	want, got := decodeFloats(base.RawOutputContents[0]), decodeFloats(resp.RawOutputContents[0])
	var maxRel, minRel float64 = 0, 1
	above, below := 0, 0
	for i := range want {
		rel := (float64(got[i]) - float64(want[i])) / float64(want[i])
		if math.Abs(rel) > p*(1+1e-6)+1e-7 {
			t.Fatalf("element %d: %v → %v, relative change %v beyond %v", i, want[i], got[i], rel, p)
		}
		maxRel, minRel = max(maxRel, rel), min(minRel, rel)
		if rel > 0 {
			above++
		} else if rel < 0 {
			below++
		}
	}
	if maxRel < 0.8*p || minRel > -0.8*p || above < 20 || below < 20 {
		t.Errorf("noise over %d elements spans [%v, %v] (%d up, %d down); want most of ±%v both ways", len(want), minRel, maxRel, below, above, p)
	}
	// Another call draws other noise.
	again, err := h.ks.ModelInfer(ctx, classifierKServe("resnet50", n, in))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(again.RawOutputContents[0], resp.RawOutputContents[0]) {
		t.Error("two perturbed calls answered the same bytes")
	}

	// INT32: simple's sum, rounded.
	if _, err := h.srv.SetFault(Fault{Model: "simple", Perturb: 0.2}); err != nil {
		t.Fatal(err)
	}
	a := make([]int32, 16)
	for i := range a {
		a[i] = int32(1000 * (i + 1))
	}
	sresp, err := h.ks.ModelInfer(ctx, &kservepb.ModelInferRequest{
		ModelName: "simple",
		Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
		},
		RawInputContents: [][]byte{rawInt32s(a), rawInt32s(make([]int32, 16))},
	})
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i, v := range decodeInt32s(sresp.RawOutputContents[0]) {
		if math.Abs(float64(v-a[i])) > 0.2*float64(a[i])+0.5 {
			t.Errorf("simple OUTPUT0[%d] = %d, more than 20%% from %d", i, v, a[i])
		}
		if v != a[i] {
			changed++
		}
	}
	if changed < 12 {
		t.Errorf("perturb 0.2 changed %d of 16 INT32 elements", changed)
	}
}

// TestFlipVersionScoped: flip_rate 1 on version 2 changes the argmax of
// every row of version 2's answers and leaves version 1's answers
// bit-identical, on both doors and on ModelStreamInfer.
func TestFlipVersionScoped(t *testing.T) {
	h := start(t, Config{Models: versionedModels()})
	ctx := context.Background()
	const n = 16
	in := seq(n*64, 0.9, -0.0021)
	kserve := func(version string) []byte {
		t.Helper()
		req := classifierKServe("resnet50", n, in)
		req.ModelVersion = version
		resp, err := h.ks.ModelInfer(ctx, req)
		if err != nil || resp.ModelVersion != version {
			t.Fatalf("version %s: %v (answered by %q)", version, err, resp.GetModelVersion())
		}
		return resp.RawOutputContents[0]
	}
	tf := func(version int64) []float32 {
		t.Helper()
		req := classifierTF("resnet50", n, in)
		req.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(version)}
		resp, err := h.tf.Predict(ctx, req)
		if err != nil {
			t.Fatalf("Predict version %d: %v", version, err)
		}
		return resp.Outputs["probs"].FloatVal
	}
	stream := func(version string) []byte {
		t.Helper()
		st, err := h.ks.ModelStreamInfer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		req := classifierKServe("resnet50", n, in)
		req.ModelVersion = version
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
		st.CloseSend()
		resp, err := st.Recv()
		if err != nil || resp.ErrorMessage != "" {
			t.Fatalf("stream version %s: %v %q", version, err, resp.GetErrorMessage())
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("stream after the answer: %v", err)
		}
		return resp.InferResponse.RawOutputContents[0]
	}

	k1, k2, t1, t2, s1 := kserve("1"), kserve("2"), tf(1), tf(2), stream("1")
	if !slices.Equal(k1, k2) || !slices.Equal(k1, s1) || !slices.Equal(decodeFloats(k1), t1) || !slices.Equal(t1, t2) {
		t.Fatal("versions 1 and 2 answer differently before the fault")
	}
	want := argmaxRows(decodeFloats(k1), 10)
	if _, err := h.srv.SetFault(Fault{Model: "resnet50", Version: "2", FlipRate: 1}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := kserve("1"); !slices.Equal(got, k1) {
			t.Fatal("KServe version 1 changed under version 2's fault")
		}
		if got := stream("1"); !slices.Equal(got, k1) {
			t.Fatal("ModelStreamInfer version 1 changed under version 2's fault")
		}
		if got := tf(1); !slices.Equal(got, t1) {
			t.Fatal("TF-Serving version 1 changed under version 2's fault")
		}
		for door, got := range map[string][]float32{
			"kserve": decodeFloats(kserve("2")), "stream": decodeFloats(stream("2")), "tfserving": tf(2),
		} {
			if len(got) != n*10 {
				t.Fatalf("%s version 2: %d values, want %d", door, len(got), n*10)
			}
			for r, a := range argmaxRows(got, 10) {
				if a == want[r] {
					t.Errorf("%s version 2 row %d: argmax %d unchanged", door, r, a)
				}
			}
			// A flip is a permutation of each row: the values sum as before.
			slices.Sort(got)
			sorted := slices.Clone(decodeFloats(k1))
			slices.Sort(sorted)
			if !slices.Equal(got, sorted) {
				t.Errorf("%s version 2: flipped values are not a permutation of the answer", door)
			}
		}
	}
	// Perturb on version 2 likewise leaves version 1 alone.
	if _, err := h.srv.SetFault(Fault{Model: "resnet50", Version: "2", Perturb: 0.01}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kserve("1"), k1) || !slices.Equal(tf(1), t1) || slices.Equal(kserve("2"), k1) || slices.Equal(tf(2), t1) {
		t.Error("perturb on version 2: version 1 changed or version 2 did not")
	}
}

// TestPerturbTFServing: the TF-Serving answer (float_val) is perturbed
// within bounds, and an identity model's tensor_content is a new buffer
// with the request left untouched.
func TestPerturbTFServing(t *testing.T) {
	h := start(t, Config{})
	ctx := context.Background()
	const p = 0.1
	in := seq(3*64, 0.3, 0.01)
	base, err := h.tf.Predict(ctx, classifierTF("mobilenet_v3", 3, in))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.SetFault(Fault{Model: "mobilenet_v3", Perturb: p}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.tf.Predict(ctx, classifierTF("mobilenet_v3", 3, in))
	if err != nil {
		t.Fatal(err)
	}
	want, got := base.Outputs["probs"].FloatVal, resp.Outputs["probs"].FloatVal
	if len(got) != len(want) || slices.Equal(got, want) {
		t.Fatalf("perturbed float_val: %d values (want %d), equal %v", len(got), len(want), slices.Equal(got, want))
	}
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > p*float64(want[i])*(1+1e-6)+1e-7 {
			t.Errorf("float_val[%d] %v → %v beyond %v relative", i, want[i], got[i], p)
		}
	}

	if _, err := h.srv.SetFault(Fault{Model: "identity_fp32", FlipRate: 1}); err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 4, 2, 3}
	req := identityRequest(x)
	r, err := h.srv.modelInfer(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeFloats(r.RawOutputContents[0]); !slices.Equal(got, []float32{1, 3, 2, 4}) {
		t.Errorf("identity flipped = %v, want [1 3 2 4]", got)
	}
	if !slices.Equal(decodeFloats(req.RawInputContents[0]), x) {
		t.Error("the flip wrote into the request's bytes")
	}
}
