package merge

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	kpb "github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// kDatatypes lists every KServe datatype the codec batches.
var kDatatypes = []string{"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "BF16", "FP32", "FP64", "BYTES"}

// tDtypes lists every TF dtype the codec batches.
var tDtypes = []tensorflowpb.DataType{
	tensorflowpb.DataType_DT_FLOAT, tensorflowpb.DataType_DT_DOUBLE, tensorflowpb.DataType_DT_INT32,
	tensorflowpb.DataType_DT_INT64, tensorflowpb.DataType_DT_UINT8, tensorflowpb.DataType_DT_INT8,
	tensorflowpb.DataType_DT_INT16, tensorflowpb.DataType_DT_UINT16, tensorflowpb.DataType_DT_UINT32,
	tensorflowpb.DataType_DT_UINT64, tensorflowpb.DataType_DT_BOOL, tensorflowpb.DataType_DT_HALF,
	tensorflowpb.DataType_DT_BFLOAT16, tensorflowpb.DataType_DT_STRING,
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := marshalOpts.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func numElems(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// val returns a deterministic element value for (seed, i), varied enough
// that a misplaced row shows up.
func val(seed, i int) uint64 { return uint64(seed*7919 + i*31 + 1) }

// kContents builds typed contents of n elements for dt.
func kContents(dt string, n, seed int) *kpb.InferTensorContents {
	c := new(kpb.InferTensorContents)
	for i := range n {
		v := val(seed, i)
		switch dt {
		case "BOOL":
			c.BoolContents = append(c.BoolContents, v%2 == 0)
		case "INT8":
			c.IntContents = append(c.IntContents, int32(int8(v)))
		case "INT16":
			c.IntContents = append(c.IntContents, int32(int16(v)))
		case "INT32":
			c.IntContents = append(c.IntContents, -int32(v))
		case "INT64":
			c.Int64Contents = append(c.Int64Contents, -int64(v)<<20)
		case "UINT8":
			c.UintContents = append(c.UintContents, uint32(uint8(v)))
		case "UINT16":
			c.UintContents = append(c.UintContents, uint32(uint16(v)))
		case "UINT32":
			c.UintContents = append(c.UintContents, uint32(v))
		case "UINT64":
			c.Uint64Contents = append(c.Uint64Contents, v<<33)
		case "FP32":
			c.Fp32Contents = append(c.Fp32Contents, float32(v)/3)
		case "FP64":
			c.Fp64Contents = append(c.Fp64Contents, float64(v)/7)
		case "BYTES":
			c.BytesContents = append(c.BytesContents, []byte(fmt.Sprintf("s%04d", v%10000)[:v%5]))
		default:
			panic("no typed contents for " + dt)
		}
	}
	return c
}

// kEncodeRaw encodes typed contents (or, for FP16/BF16, synthesises n
// elements) in raw little-endian form, the way a client or Triton would.
func kEncodeRaw(dt string, c *kpb.InferTensorContents, n, seed int) []byte {
	var b []byte
	switch dt {
	case "BOOL":
		for _, v := range c.GetBoolContents() {
			if v {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case "INT8", "UINT8":
		for _, v := range append(c.GetIntContents(), int32sOf(c.GetUintContents())...) {
			b = append(b, byte(v))
		}
	case "INT16", "UINT16":
		for _, v := range append(c.GetIntContents(), int32sOf(c.GetUintContents())...) {
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		}
	case "INT32", "UINT32":
		for _, v := range append(c.GetIntContents(), int32sOf(c.GetUintContents())...) {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	case "INT64":
		for _, v := range c.GetInt64Contents() {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	case "UINT64":
		for _, v := range c.GetUint64Contents() {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	case "FP32":
		for _, v := range c.GetFp32Contents() {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	case "FP64":
		for _, v := range c.GetFp64Contents() {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	case "BYTES":
		for _, v := range c.GetBytesContents() {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	case "FP16", "BF16":
		for i := range n {
			b = binary.LittleEndian.AppendUint16(b, uint16(val(seed, i)))
		}
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

func int32sOf(u []uint32) []int32 {
	out := make([]int32, len(u))
	for i, v := range u {
		out[i] = int32(v)
	}
	return out
}

// kTensor describes one input for kReq.
type kTensor struct {
	name, dt string
	shape    []int64
}

// kReq builds a request with deterministic data; raw picks the
// representation.
func kReq(id string, raw bool, seed int, ins ...kTensor) *kpb.ModelInferRequest {
	req := &kpb.ModelInferRequest{ModelName: "m", ModelVersion: "1", Id: id}
	for i, in := range ins {
		n := numElems(in.shape)
		t := &kpb.ModelInferRequest_InferInputTensor{Name: in.name, Datatype: in.dt, Shape: in.shape}
		var c *kpb.InferTensorContents
		if in.dt != "FP16" && in.dt != "BF16" {
			c = kContents(in.dt, n, seed+i)
		}
		if raw {
			req.RawInputContents = append(req.RawInputContents, kEncodeRaw(in.dt, c, n, seed+i))
		} else {
			t.Contents = c
		}
		req.Inputs = append(req.Inputs, t)
	}
	return req
}

// kModel is a fake Triton: every input comes back as output "out_<name>",
// same datatype, shape and values (so it is per-row deterministic). With
// forceRaw the outputs are raw, as Triton always answers; otherwise they
// keep the request's representation.
func kModel(req *kpb.ModelInferRequest, forceRaw bool) *kpb.ModelInferResponse {
	resp := &kpb.ModelInferResponse{ModelName: req.ModelName, ModelVersion: req.ModelVersion, Id: req.Id}
	raw := forceRaw || len(req.RawInputContents) > 0
	for i, in := range req.Inputs {
		o := &kpb.ModelInferResponse_InferOutputTensor{Name: "out_" + in.Name, Datatype: in.Datatype, Shape: in.Shape}
		switch {
		case len(req.RawInputContents) > 0:
			resp.RawOutputContents = append(resp.RawOutputContents, req.RawInputContents[i])
		case raw:
			resp.RawOutputContents = append(resp.RawOutputContents, kEncodeRaw(in.Datatype, in.Contents, 0, 0))
		default:
			o.Contents = in.Contents
			if o.Contents == nil {
				o.Contents = new(kpb.InferTensorContents)
			}
		}
		resp.Outputs = append(resp.Outputs, o)
	}
	return resp
}

// kRoundTrip parses reqs, merges them, runs the fake model on the merged
// request, splits, and checks every caller's response against the fake
// model run on its request alone.
func kRoundTrip(t testing.TB, reqs []*kpb.ModelInferRequest, forceRaw bool) {
	t.Helper()
	items := make([]*Item, len(reqs))
	for i, r := range reqs {
		it, err := KServe.Parse(mustMarshal(t, r))
		if err != nil {
			t.Fatalf("parse %d: %v", i, err)
		}
		items[i] = it
	}
	kCheckRoundTrip(t, items, forceRaw)
}

func kCheckRoundTrip(t testing.TB, items []*Item, forceRaw bool) {
	t.Helper()
	b, err := KServe.Merge(items)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	merged := new(kpb.ModelInferRequest)
	if err := proto.Unmarshal(b, merged); err != nil {
		t.Fatalf("merged request does not decode: %v", err)
	}
	if merged.Id != "" {
		t.Errorf("merged id = %q, want empty", merged.Id)
	}
	total := 0
	for _, it := range items {
		total += it.Rows
	}
	for _, in := range merged.Inputs {
		if in.Shape[0] != int64(total) {
			t.Errorf("merged input %q shape %v, want dim 0 = %d", in.Name, in.Shape, total)
		}
	}
	if again, err := KServe.Parse(b); err != nil || again.Key != items[0].Key || again.Rows != total {
		t.Errorf("merged request does not parse back to the same key and %d rows: %v", total, err)
	}
	parts, err := KServe.Split(mustMarshal(t, kModel(merged, forceRaw)), items)
	if err != nil {
		t.Fatalf("split: %v", err)
	}
	if len(parts) != len(items) {
		t.Fatalf("split gave %d parts for %d items", len(parts), len(items))
	}
	for i, it := range items {
		got := new(kpb.ModelInferResponse)
		if err := proto.Unmarshal(parts[i], got); err != nil {
			t.Fatalf("part %d does not decode: %v", i, err)
		}
		want := kModel(it.kreq, forceRaw)
		if !proto.Equal(got, want) {
			t.Errorf("part %d:\n got %v\nwant %v", i, got, want)
		}
	}
}

// tTensor builds a TF tensor of the given shape with deterministic values,
// in tensor_content (content) or the dtype's *_val field.
func tTensor(dt tensorflowpb.DataType, shape []int64, seed int, content bool) *tensorflowpb.TensorProto {
	t := &tensorflowpb.TensorProto{Dtype: dt, TensorShape: new(tensorflowpb.TensorShapeProto)}
	for _, d := range shape {
		t.TensorShape.Dim = append(t.TensorShape.Dim, &tensorflowpb.TensorShapeProto_Dim{Size: d})
	}
	n := numElems(shape)
	for i := range n {
		v := val(seed, i)
		if content {
			switch size, _ := tfType(dt); size.size {
			case 1:
				t.TensorContent = append(t.TensorContent, byte(v))
			case 2:
				t.TensorContent = binary.LittleEndian.AppendUint16(t.TensorContent, uint16(v))
			case 4:
				t.TensorContent = binary.LittleEndian.AppendUint32(t.TensorContent, uint32(v))
			case 8:
				t.TensorContent = binary.LittleEndian.AppendUint64(t.TensorContent, v<<17)
			}
			continue
		}
		switch dt {
		case tensorflowpb.DataType_DT_FLOAT:
			t.FloatVal = append(t.FloatVal, float32(v)/3)
		case tensorflowpb.DataType_DT_DOUBLE:
			t.DoubleVal = append(t.DoubleVal, float64(v)/7)
		case tensorflowpb.DataType_DT_INT32:
			t.IntVal = append(t.IntVal, -int32(v))
		case tensorflowpb.DataType_DT_UINT8:
			t.IntVal = append(t.IntVal, int32(uint8(v)))
		case tensorflowpb.DataType_DT_INT8:
			t.IntVal = append(t.IntVal, int32(int8(v)))
		case tensorflowpb.DataType_DT_INT16:
			t.IntVal = append(t.IntVal, int32(int16(v)))
		case tensorflowpb.DataType_DT_UINT16:
			t.IntVal = append(t.IntVal, int32(uint16(v)))
		case tensorflowpb.DataType_DT_INT64:
			t.Int64Val = append(t.Int64Val, -int64(v)<<20)
		case tensorflowpb.DataType_DT_BOOL:
			t.BoolVal = append(t.BoolVal, v%3 == 0)
		case tensorflowpb.DataType_DT_HALF, tensorflowpb.DataType_DT_BFLOAT16:
			t.HalfVal = append(t.HalfVal, int32(uint16(v)))
		case tensorflowpb.DataType_DT_UINT32:
			t.Uint32Val = append(t.Uint32Val, uint32(v))
		case tensorflowpb.DataType_DT_UINT64:
			t.Uint64Val = append(t.Uint64Val, v<<33)
		case tensorflowpb.DataType_DT_STRING:
			t.StringVal = append(t.StringVal, []byte(fmt.Sprintf("s%04d", v%10000)[:v%5]))
		}
	}
	return t
}

func tReq(inputs map[string]*tensorflowpb.TensorProto) *tfservingpb.PredictRequest {
	return &tfservingpb.PredictRequest{
		ModelSpec: &tfservingpb.ModelSpec{Name: "m", SignatureName: "serving_default"},
		Inputs:    inputs,
	}
}

// tModel is a fake TF-Serving: every input comes back as "out_<name>",
// same tensor, and the response carries the request's model spec.
func tModel(req *tfservingpb.PredictRequest) *tfservingpb.PredictResponse {
	resp := &tfservingpb.PredictResponse{ModelSpec: req.ModelSpec, Outputs: map[string]*tensorflowpb.TensorProto{}}
	for name, t := range req.Inputs {
		resp.Outputs["out_"+name] = t
	}
	return resp
}

func tRoundTrip(t testing.TB, reqs []*tfservingpb.PredictRequest) {
	t.Helper()
	items := make([]*Item, len(reqs))
	for i, r := range reqs {
		it, err := TF.Parse(mustMarshal(t, r))
		if err != nil {
			t.Fatalf("parse %d: %v", i, err)
		}
		items[i] = it
	}
	tCheckRoundTrip(t, items)
}

func tCheckRoundTrip(t testing.TB, items []*Item) {
	t.Helper()
	b, err := TF.Merge(items)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	merged := new(tfservingpb.PredictRequest)
	if err := proto.Unmarshal(b, merged); err != nil {
		t.Fatalf("merged request does not decode: %v", err)
	}
	total := 0
	for _, it := range items {
		total += it.Rows
	}
	if again, err := TF.Parse(b); err != nil || again.Key != items[0].Key || again.Rows != total {
		t.Errorf("merged request does not parse back to the same key and %d rows: %v", total, err)
	}
	parts, err := TF.Split(mustMarshal(t, tModel(merged)), items)
	if err != nil {
		t.Fatalf("split: %v", err)
	}
	if len(parts) != len(items) {
		t.Fatalf("split gave %d parts for %d items", len(parts), len(items))
	}
	for i, it := range items {
		got := new(tfservingpb.PredictResponse)
		if err := proto.Unmarshal(parts[i], got); err != nil {
			t.Fatalf("part %d does not decode: %v", i, err)
		}
		want := tModel(it.treq)
		if !proto.Equal(got, want) {
			t.Errorf("part %d:\n got %v\nwant %v", i, got, want)
		}
	}
}
