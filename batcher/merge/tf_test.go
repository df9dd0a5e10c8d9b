package merge

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func TestTFRoundTripEveryDtype(t *testing.T) {
	rowSets := [][]int{{1}, {2, 1}, {1, 3, 2, 1}}
	for _, dt := range tDtypes {
		for _, content := range []bool{true, false} {
			if content && dt == tensorflowpb.DataType_DT_STRING {
				continue // strings only travel in string_val
			}
			t.Run(fmt.Sprintf("%v/tensor_content=%v", dt, content), func(t *testing.T) {
				for _, rows := range rowSets {
					var reqs []*tfservingpb.PredictRequest
					for i, r := range rows {
						reqs = append(reqs, tReq(map[string]*tensorflowpb.TensorProto{
							"x": tTensor(dt, []int64{int64(r), 2, 3}, 10*i, content),
						}))
					}
					tRoundTrip(t, reqs)
				}
			})
		}
	}
}

func TestTFRoundTripSeveralInputs(t *testing.T) {
	var reqs []*tfservingpb.PredictRequest
	for i, r := range []int{2, 1, 3} {
		req := tReq(map[string]*tensorflowpb.TensorProto{
			"a": tTensor(tensorflowpb.DataType_DT_FLOAT, []int64{int64(r), 4}, i, true),
			"b": tTensor(tensorflowpb.DataType_DT_STRING, []int64{int64(r)}, i+1, false),
			"c": tTensor(tensorflowpb.DataType_DT_INT64, []int64{int64(r), 1, 2}, i+2, false),
		})
		req.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(3)}
		req.OutputFilter = []string{"out_a", "out_c"}
		reqs = append(reqs, req)
	}
	tRoundTrip(t, reqs)
}

func TestTFMergedRequest(t *testing.T) {
	a := tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(tensorflowpb.DataType_DT_FLOAT, []int64{1, 2}, 1, false)})
	b := tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(tensorflowpb.DataType_DT_FLOAT, []int64{2, 2}, 2, false)})
	ia, _ := TF.Parse(mustMarshal(t, a))
	ib, _ := TF.Parse(mustMarshal(t, b))
	out, err := TF.Merge([]*Item{ia, ib})
	if err != nil {
		t.Fatal(err)
	}
	want := tReq(map[string]*tensorflowpb.TensorProto{"x": {
		Dtype:       tensorflowpb.DataType_DT_FLOAT,
		TensorShape: &tensorflowpb.TensorShapeProto{Dim: []*tensorflowpb.TensorShapeProto_Dim{{Size: 3}, {Size: 2}}},
		FloatVal:    append(append([]float32{}, a.Inputs["x"].FloatVal...), b.Inputs["x"].FloatVal...),
	}})
	got := new(tfservingpb.PredictRequest)
	if err := proto.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("merged:\n got %v\nwant %v", got, want)
	}
	// Deterministic marshalling: the same merge gives the same bytes.
	for range 5 {
		again, _ := TF.Merge([]*Item{ia, ib})
		if string(again) != string(out) {
			t.Fatal("merge output is not deterministic")
		}
	}
}

// TestTFSplitBroadcastResponse: TF may answer a *_val field shorter than the
// tensor (the last value repeats); every caller gets its own rows' values in
// the same shorthand.
func TestTFSplitBroadcastResponse(t *testing.T) {
	mk := func(r int64) *Item {
		it, err := TF.Parse(mustMarshal(t, tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(tensorflowpb.DataType_DT_FLOAT, []int64{r, 2}, 1, false)})))
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	items := []*Item{mk(1), mk(2)}
	shape := func(r int64) *tensorflowpb.TensorShapeProto {
		return &tensorflowpb.TensorShapeProto{Dim: []*tensorflowpb.TensorShapeProto_Dim{{Size: r}, {Size: 2}}}
	}
	resp := &tfservingpb.PredictResponse{Outputs: map[string]*tensorflowpb.TensorProto{
		"y": {Dtype: tensorflowpb.DataType_DT_FLOAT, TensorShape: shape(3), FloatVal: []float32{1, 2, 3}},
		"z": {Dtype: tensorflowpb.DataType_DT_INT32, TensorShape: shape(3)}, // zero-filled
	}}
	parts, err := TF.Split(mustMarshal(t, resp), items)
	if err != nil {
		t.Fatal(err)
	}
	want := []*tfservingpb.PredictResponse{
		{Outputs: map[string]*tensorflowpb.TensorProto{
			"y": {Dtype: tensorflowpb.DataType_DT_FLOAT, TensorShape: shape(1), FloatVal: []float32{1, 2}},
			"z": {Dtype: tensorflowpb.DataType_DT_INT32, TensorShape: shape(1)},
		}},
		{Outputs: map[string]*tensorflowpb.TensorProto{
			"y": {Dtype: tensorflowpb.DataType_DT_FLOAT, TensorShape: shape(2), FloatVal: []float32{3}},
			"z": {Dtype: tensorflowpb.DataType_DT_INT32, TensorShape: shape(2)},
		}},
	}
	for i := range parts {
		got := new(tfservingpb.PredictResponse)
		if err := proto.Unmarshal(parts[i], got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want[i]) {
			t.Errorf("part %d:\n got %v\nwant %v", i, got, want[i])
		}
	}
}

func TestTFMixedBatch(t *testing.T) {
	f := tensorflowpb.DataType_DT_FLOAT
	bad := tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{2, 3}, 0, true)})
	bad.Inputs["x"].TensorContent = bad.Inputs["x"].TensorContent[:7]
	reqs := []*tfservingpb.PredictRequest{
		tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{1, 3}, 1, true)}),
		tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{1, 3}, 2, false)}), // typed
		bad,
		tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{4, 3}, 3, true)}),
		tReq(map[string]*tensorflowpb.TensorProto{"y": tTensor(f, []int64{1, 3}, 4, true)}), // other name
		tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{2, 3}, 5, false)}),
	}
	groups := map[string][]*Item{}
	var order []string
	for _, r := range reqs {
		it, err := TF.Parse(mustMarshal(t, r))
		if r == bad {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("malformed request: err = %v, want ErrInvalid", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if groups[it.Key] == nil {
			order = append(order, it.Key)
		}
		groups[it.Key] = append(groups[it.Key], it)
	}
	sizes := []int{}
	for _, k := range order {
		sizes = append(sizes, len(groups[k]))
		tCheckRoundTrip(t, groups[k])
	}
	if fmt.Sprint(sizes) != "[2 2 1]" {
		t.Errorf("group sizes %v, want [2 2 1]", sizes)
	}
}

func TestTFKeys(t *testing.T) {
	f := tensorflowpb.DataType_DT_FLOAT
	base := func() *tfservingpb.PredictRequest {
		return tReq(map[string]*tensorflowpb.TensorProto{
			"x": tTensor(f, []int64{2, 3}, 1, true),
			"s": tTensor(tensorflowpb.DataType_DT_STRING, []int64{2}, 1, false),
		})
	}
	cases := []struct {
		name  string
		edit  func(r *tfservingpb.PredictRequest)
		equal bool
	}{
		{"other rows and data", func(r *tfservingpb.PredictRequest) {
			r.Inputs["x"] = tTensor(f, []int64{5, 3}, 9, true)
			r.Inputs["s"] = tTensor(tensorflowpb.DataType_DT_STRING, []int64{5}, 9, false)
		}, true},
		{"model name", func(r *tfservingpb.PredictRequest) { r.ModelSpec.Name = "n" }, false},
		{"signature", func(r *tfservingpb.PredictRequest) { r.ModelSpec.SignatureName = "other" }, false},
		{"version", func(r *tfservingpb.PredictRequest) {
			r.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(2)}
		}, false},
		{"version label", func(r *tfservingpb.PredictRequest) {
			r.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "stable"}
		}, false},
		{"shape beyond dim 0", func(r *tfservingpb.PredictRequest) { r.Inputs["x"] = tTensor(f, []int64{2, 4}, 1, true) }, false},
		{"dtype", func(r *tfservingpb.PredictRequest) {
			r.Inputs["x"] = tTensor(tensorflowpb.DataType_DT_INT32, []int64{2, 3}, 1, true)
		}, false},
		{"input name", func(r *tfservingpb.PredictRequest) { r.Inputs["x2"] = r.Inputs["x"]; delete(r.Inputs, "x") }, false},
		{"representation", func(r *tfservingpb.PredictRequest) { r.Inputs["x"] = tTensor(f, []int64{2, 3}, 1, false) }, false},
		{"output filter", func(r *tfservingpb.PredictRequest) { r.OutputFilter = []string{"y"} }, false},
		{"dim name", func(r *tfservingpb.PredictRequest) { r.Inputs["x"].TensorShape.Dim[1].Name = "feat" }, false},
	}
	b, err := TF.Parse(mustMarshal(t, base()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			tc.edit(r)
			it, err := TF.Parse(mustMarshal(t, r))
			if err != nil {
				t.Fatal(err)
			}
			if (it.Key == b.Key) != tc.equal {
				t.Errorf("keys equal = %v, want %v", it.Key == b.Key, tc.equal)
			}
		})
	}
	r1, r2 := base(), base()
	r1.OutputFilter = []string{"a", "b"}
	r2.OutputFilter = []string{"b", "a"}
	i1, _ := TF.Parse(mustMarshal(t, r1))
	i2, _ := TF.Parse(mustMarshal(t, r2))
	if i1.Key != i2.Key {
		t.Error("output_filter order changes the key")
	}
}

func TestTFParseErrors(t *testing.T) {
	f := tensorflowpb.DataType_DT_FLOAT
	one := func(tp *tensorflowpb.TensorProto) []byte {
		return mustMarshal(t, tReq(map[string]*tensorflowpb.TensorProto{"x": tp}))
	}
	cases := []struct {
		name string
		req  func() []byte
		want error
	}{
		{"not protobuf", func() []byte { return []byte{0x12, 0x05, 0x01} }, ErrInvalid},
		{"no model_spec", func() []byte {
			return mustMarshal(t, &tfservingpb.PredictRequest{Inputs: map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{1}, 1, true)}})
		}, ErrInvalid},
		{"no inputs", func() []byte { return mustMarshal(t, tReq(nil)) }, ErrInvalid},
		{"dim 0 differs", func() []byte {
			return mustMarshal(t, tReq(map[string]*tensorflowpb.TensorProto{"a": tTensor(f, []int64{1, 2}, 1, true), "b": tTensor(f, []int64{2, 2}, 1, true)}))
		}, ErrInvalid},
		{"content too short", func() []byte {
			tp := tTensor(f, []int64{2, 2}, 1, true)
			tp.TensorContent = tp.TensorContent[:15]
			return one(tp)
		}, ErrInvalid},
		{"content and val", func() []byte {
			tp := tTensor(f, []int64{1, 2}, 1, true)
			tp.FloatVal = []float32{1, 2}
			return one(tp)
		}, ErrInvalid},
		{"too many values", func() []byte {
			tp := tTensor(f, []int64{1, 2}, 1, false)
			tp.FloatVal = append(tp.FloatVal, 5)
			return one(tp)
		}, ErrInvalid},
		{"val for other dtype", func() []byte {
			tp := tTensor(f, []int64{1, 2}, 1, false)
			tp.Dtype = tensorflowpb.DataType_DT_INT32
			return one(tp)
		}, ErrInvalid},
		{"two val fields", func() []byte {
			tp := tTensor(f, []int64{1, 2}, 1, false)
			tp.IntVal = []int32{1, 2}
			return one(tp)
		}, ErrInvalid},
		{"DT_INVALID", func() []byte {
			tp := tTensor(f, []int64{1, 2}, 1, true)
			tp.Dtype = tensorflowpb.DataType_DT_INVALID
			return one(tp)
		}, ErrInvalid},
		{"negative dim", func() []byte { return one(tTensor(f, []int64{1, -1}, 1, false)) }, ErrInvalid},
		{"unknown rank", func() []byte {
			tp := tTensor(f, []int64{1}, 1, false)
			tp.TensorShape.UnknownRank = true
			return one(tp)
		}, ErrInvalid},
		{"overflowing shape", func() []byte {
			tp := tTensor(f, []int64{1}, 1, true)
			tp.TensorShape.Dim = append(tp.TensorShape.Dim, &tensorflowpb.TensorShapeProto_Dim{Size: 1 << 60})
			return one(tp)
		}, ErrInvalid},
		{"duplicate output filter", func() []byte {
			r := tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{1}, 1, true)})
			r.OutputFilter = []string{"y", "y"}
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"scalar", func() []byte { return one(tTensor(f, nil, 1, false)) }, ErrUnbatchable},
		{"client_id", func() []byte {
			r := tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{1}, 1, true)})
			r.ClientId = []byte("tenant-7")
			return mustMarshal(t, r)
		}, ErrUnbatchable},
		{"request_options", func() []byte {
			r := tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{1}, 1, true)})
			r.RequestOptions = &tfservingpb.PredictRequest_RequestOptions{ClientId: []byte("t")}
			return mustMarshal(t, r)
		}, ErrUnbatchable},
		{"predict_streamed_options", func() []byte {
			r := tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{1}, 1, true)})
			r.PredictStreamedOptions = &tfservingpb.PredictStreamedOptions{RequestState: tfservingpb.PredictStreamedOptions_SPLIT}
			return mustMarshal(t, r)
		}, ErrUnbatchable},
		{"no shape", func() []byte { return one(&tensorflowpb.TensorProto{Dtype: f, FloatVal: []float32{1}}) }, ErrUnbatchable},
		{"zero rows", func() []byte { return one(tTensor(f, []int64{0, 3}, 1, false)) }, ErrUnbatchable},
		{"broadcast value", func() []byte {
			tp := tTensor(f, []int64{2, 2}, 1, false)
			tp.FloatVal = tp.FloatVal[:1]
			return one(tp)
		}, ErrUnbatchable},
		{"zero-filled", func() []byte {
			tp := tTensor(f, []int64{2, 2}, 1, false)
			tp.FloatVal = nil
			return one(tp)
		}, ErrUnbatchable},
		{"string tensor_content", func() []byte {
			tp := tTensor(tensorflowpb.DataType_DT_STRING, []int64{1}, 1, false)
			tp.StringVal = nil
			tp.TensorContent = []byte{1, 2}
			return one(tp)
		}, ErrUnbatchable},
		{"complex dtype", func() []byte {
			return one(&tensorflowpb.TensorProto{Dtype: tensorflowpb.DataType_DT_COMPLEX64,
				TensorShape: &tensorflowpb.TensorShapeProto{Dim: []*tensorflowpb.TensorShapeProto_Dim{{Size: 1}}},
				ScomplexVal: []float32{1, 2}})
		}, ErrUnbatchable},
		{"unknown field", func() []byte {
			return append(one(tTensor(f, []int64{1}, 1, true)), 0xf8, 0x01, 0x01)
		}, ErrUnbatchable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it, err := TF.Parse(tc.req())
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if it != nil {
				t.Error("item returned with error")
			}
		})
	}
}

func TestTFSplitErrors(t *testing.T) {
	f := tensorflowpb.DataType_DT_FLOAT
	it, err := TF.Parse(mustMarshal(t, tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{2, 3}, 1, true)})))
	if err != nil {
		t.Fatal(err)
	}
	items := []*Item{it, it}
	good := func() *tfservingpb.PredictResponse {
		m, _ := TF.Merge(items)
		merged := new(tfservingpb.PredictRequest)
		_ = proto.Unmarshal(m, merged)
		return tModel(merged)
	}
	cases := []struct {
		name string
		edit func(y *tensorflowpb.TensorProto)
	}{
		{"dim 0 too small", func(y *tensorflowpb.TensorProto) {
			y.TensorShape.Dim[0].Size = 3
			y.TensorContent = y.TensorContent[:36]
		}},
		{"dim 0 too large", func(y *tensorflowpb.TensorProto) {
			y.TensorShape.Dim[0].Size = 5
			y.TensorContent = append(y.TensorContent, make([]byte, 12)...)
		}},
		{"scalar", func(y *tensorflowpb.TensorProto) { y.TensorShape = nil }},
		{"content too short", func(y *tensorflowpb.TensorProto) { y.TensorContent = y.TensorContent[:47] }},
		{"content and val", func(y *tensorflowpb.TensorProto) { y.FloatVal = []float32{1} }},
		{"too many values", func(y *tensorflowpb.TensorProto) { y.TensorContent = nil; y.FloatVal = make([]float32, 13) }},
		{"val for other dtype", func(y *tensorflowpb.TensorProto) { y.TensorContent = nil; y.IntVal = make([]int32, 12) }},
		{"unsplittable dtype", func(y *tensorflowpb.TensorProto) { y.Dtype = tensorflowpb.DataType_DT_VARIANT }},
		{"string content", func(y *tensorflowpb.TensorProto) { y.Dtype = tensorflowpb.DataType_DT_STRING }},
	}
	if _, err := TF.Split(mustMarshal(t, good()), items); err != nil {
		t.Fatalf("good response: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			y := proto.CloneOf(r.Outputs["out_x"])
			tc.edit(y)
			r.Outputs["out_x"] = y
			parts, err := TF.Split(mustMarshal(t, r), items)
			if !errors.Is(err, ErrSplit) {
				t.Fatalf("err = %v, want ErrSplit", err)
			}
			if parts != nil {
				t.Error("parts returned with error")
			}
		})
	}
	if _, err := TF.Split([]byte{0x0a, 0xff}, items); !errors.Is(err, ErrSplit) {
		t.Errorf("garbage response: err = %v, want ErrSplit", err)
	}
}

func TestTFMisuse(t *testing.T) {
	k, _ := KServe.Parse(mustMarshal(t, kReq("a", true, 1, kTensor{"x", "FP32", []int64{1, 3}})))
	if _, err := TF.Merge([]*Item{k}); err == nil {
		t.Error("TF.Merge accepted a KServe item")
	}
	if _, err := TF.Split(nil, []*Item{k}); err == nil {
		t.Error("TF.Split accepted a KServe item")
	}
	tf, _ := TF.Parse(mustMarshal(t, tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(tensorflowpb.DataType_DT_FLOAT, []int64{1}, 1, true)})))
	if _, err := KServe.Merge([]*Item{tf}); err == nil {
		t.Error("KServe.Merge accepted a TF item")
	}
}

// TestTFSplitHugeBroadcast: a one-value response over a huge shape splits
// into one-value parts instead of expanding (which would exhaust memory).
func TestTFSplitHugeBroadcast(t *testing.T) {
	it, err := TF.Parse(mustMarshal(t, tReq(map[string]*tensorflowpb.TensorProto{"x": tTensor(tensorflowpb.DataType_DT_FLOAT, []int64{1, 2}, 1, false)})))
	if err != nil {
		t.Fatal(err)
	}
	dims := func(r int64) *tensorflowpb.TensorShapeProto {
		return &tensorflowpb.TensorShapeProto{Dim: []*tensorflowpb.TensorShapeProto_Dim{{Size: r}, {Size: 1 << 40}}}
	}
	resp := &tfservingpb.PredictResponse{Outputs: map[string]*tensorflowpb.TensorProto{
		"y": {Dtype: tensorflowpb.DataType_DT_DOUBLE, TensorShape: dims(2), DoubleVal: []float64{7}},
	}}
	parts, err := TF.Split(mustMarshal(t, resp), []*Item{it, it})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range parts {
		got := new(tfservingpb.PredictResponse)
		if err := proto.Unmarshal(p, got); err != nil {
			t.Fatal(err)
		}
		want := &tfservingpb.PredictResponse{Outputs: map[string]*tensorflowpb.TensorProto{
			"y": {Dtype: tensorflowpb.DataType_DT_DOUBLE, TensorShape: dims(1), DoubleVal: []float64{7}},
		}}
		if !proto.Equal(got, want) {
			t.Errorf("part %d: got %v, want %v", i, got, want)
		}
	}
}
