package merge

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	kpb "github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

var genSeeds = flag.Bool("gen-seeds", false, "rewrite the fuzz seed corpus under testdata/fuzz")

// checkParseErr fails unless err is nil or wraps exactly the documented
// request sentinels.
func checkParseErr(t *testing.T, it *Item, err error) {
	t.Helper()
	if err == nil {
		if it == nil || it.Rows < 1 {
			t.Fatalf("Parse returned item %+v without error", it)
		}
		return
	}
	if it != nil {
		t.Fatal("Parse returned an item with an error")
	}
	if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnbatchable) {
		t.Fatalf("Parse error wraps neither ErrInvalid nor ErrUnbatchable: %v", err)
	}
}

// FuzzKServeMergeSplit feeds two byte strings as ModelInferRequests: Parse
// must not panic and must classify errors; every valid item must survive a
// merge/split round trip (with itself and, when keys match, with the
// other); and Split must reject an arbitrary response cleanly.
func FuzzKServeMergeSplit(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ia, err := KServe.Parse(a)
		checkParseErr(t, ia, err)
		ib, err := KServe.Parse(b)
		checkParseErr(t, ib, err)
		if ia == nil {
			return
		}
		if _, err := KServe.Split(b, []*Item{ia}); err != nil && !errors.Is(err, ErrSplit) {
			t.Fatalf("Split error does not wrap ErrSplit: %v", err)
		}
		kCheckRoundTrip(t, []*Item{ia, ia}, false)
		kCheckRoundTrip(t, []*Item{ia}, true)
		if ib != nil && ib.Key == ia.Key {
			kCheckRoundTrip(t, []*Item{ia, ib, ia}, false)
			kCheckRoundTrip(t, []*Item{ib, ia}, true)
		}
	})
}

// FuzzTFMergeSplit is FuzzKServeMergeSplit for PredictRequests.
func FuzzTFMergeSplit(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ia, err := TF.Parse(a)
		checkParseErr(t, ia, err)
		ib, err := TF.Parse(b)
		checkParseErr(t, ib, err)
		if ia == nil {
			return
		}
		if _, err := TF.Split(b, []*Item{ia}); err != nil && !errors.Is(err, ErrSplit) {
			t.Fatalf("Split error does not wrap ErrSplit: %v", err)
		}
		tCheckRoundTrip(t, []*Item{ia, ia})
		if ib != nil && ib.Key == ia.Key {
			tCheckRoundTrip(t, []*Item{ia, ib, ia})
		}
	})
}

// fuzzSeeds returns named (a, b) seed pairs for each fuzz target: valid
// compatible pairs in every representation, plus invalid and unbatchable
// requests and a response as b.
func fuzzSeeds(t *testing.T) map[string]map[string][2][]byte {
	kb := func(r *kpb.ModelInferRequest) []byte { return mustMarshal(t, r) }
	shortRaw := kReq("bad", true, 1, kTensor{"x", "FP32", []int64{2, 2}})
	shortRaw.RawInputContents[0] = shortRaw.RawInputContents[0][:3]
	seq := kReq("seq", true, 1, kTensor{"x", "FP32", []int64{1, 2}})
	seq.Parameters = map[string]*kpb.InferParameter{"sequence_id": {ParameterChoice: &kpb.InferParameter_Int64Param{Int64Param: 4}}}
	multi := func(r int64, raw bool, seed int) []byte {
		return kb(kReq("m", raw, seed, kTensor{"INPUT0", "INT32", []int64{r, 16}}, kTensor{"s", "BYTES", []int64{r, 2}}, kTensor{"h", "FP16", []int64{r, 3}}))
	}
	typedMulti := func(r int64, seed int) []byte {
		return kb(kReq("t", false, seed, kTensor{"INPUT0", "INT32", []int64{r, 4}}, kTensor{"s", "BYTES", []int64{r}}, kTensor{"b", "BOOL", []int64{r, 2}}))
	}
	resnetReq := kb(kReq("r", true, 1, kTensor{"input", "FP32", []int64{1, 64}}))
	resnetResp := mustMarshal(t, &kpb.ModelInferResponse{
		ModelName: "m", Outputs: []*kpb.ModelInferResponse_InferOutputTensor{{Name: "probs", Datatype: "FP32", Shape: []int64{1, 10}}},
		RawOutputContents: [][]byte{make([]byte, 40)},
	})

	tb := func(in map[string]*tensorflowpb.TensorProto) []byte { return mustMarshal(t, tReq(in)) }
	f := tensorflowpb.DataType_DT_FLOAT
	str := tensorflowpb.DataType_DT_STRING
	bcast := tTensor(f, []int64{2, 2}, 1, false)
	bcast.FloatVal = bcast.FloatVal[:1]
	tfResp := mustMarshal(t, &tfservingpb.PredictResponse{Outputs: map[string]*tensorflowpb.TensorProto{"out_x": tTensor(f, []int64{1, 3}, 1, true)}})

	return map[string]map[string][2][]byte{
		"FuzzKServeMergeSplit": {
			"raw-fp32":     {kb(kReq("a", true, 1, kTensor{"x", "FP32", []int64{1, 3}})), kb(kReq("b", true, 2, kTensor{"x", "FP32", []int64{2, 3}}))},
			"raw-multi":    {multi(2, true, 1), multi(1, true, 5)},
			"typed-multi":  {typedMulti(1, 1), typedMulti(3, 4)},
			"raw-bytes":    {kb(kReq("a", true, 1, kTensor{"s", "BYTES", []int64{3}})), kb(kReq("b", true, 1, kTensor{"s", "BYTES", []int64{1}}))},
			"typed-uint64": {kb(kReq("a", false, 1, kTensor{"u", "UINT64", []int64{2, 2}})), kb(kReq("b", false, 3, kTensor{"u", "UINT64", []int64{1, 2}}))},
			"invalid":      {kb(shortRaw), kb(seq)},
			"resnet-resp":  {resnetReq, resnetResp},
		},
		"FuzzTFMergeSplit": {
			"content-float": {tb(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{1, 3}, 1, true)}), tb(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{2, 3}, 2, true)})},
			"val-multi": {
				tb(map[string]*tensorflowpb.TensorProto{"x": tTensor(tensorflowpb.DataType_DT_INT16, []int64{1, 2}, 1, false), "s": tTensor(str, []int64{1}, 1, false)}),
				tb(map[string]*tensorflowpb.TensorProto{"x": tTensor(tensorflowpb.DataType_DT_INT16, []int64{3, 2}, 2, false), "s": tTensor(str, []int64{3}, 2, false)}),
			},
			"half":     {tb(map[string]*tensorflowpb.TensorProto{"h": tTensor(tensorflowpb.DataType_DT_HALF, []int64{2}, 1, false)}), tb(map[string]*tensorflowpb.TensorProto{"h": tTensor(tensorflowpb.DataType_DT_HALF, []int64{1}, 1, false)})},
			"invalid":  {tb(map[string]*tensorflowpb.TensorProto{"x": bcast}), tb(nil)},
			"response": {tb(map[string]*tensorflowpb.TensorProto{"x": tTensor(f, []int64{1, 3}, 1, true)}), tfResp},
		},
	}
}

// TestFuzzSeedCorpus keeps the committed corpus in step with fuzzSeeds;
// run with -gen-seeds to rewrite it.
func TestFuzzSeedCorpus(t *testing.T) {
	for target, seeds := range fuzzSeeds(t) {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n[]byte(%s)\n", strconv.Quote(string(s[0])), strconv.Quote(string(s[1])))
			path := filepath.Join(dir, "seed-"+name)
			if *genSeeds {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("missing seed (run go test -run TestFuzzSeedCorpus -gen-seeds): %v", err)
			}
			if string(got) != body {
				t.Errorf("%s is stale (run go test -run TestFuzzSeedCorpus -gen-seeds)", path)
			}
		}
	}
}
