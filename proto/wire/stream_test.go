package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
)

// streamResp builds a ModelStreamInferResponse for request id with the
// given parameters and, when outputs, one output tensor.
func streamResp(id string, params map[string]*kservepb.InferParameter, outputs bool) *kservepb.ModelStreamInferResponse {
	r := &kservepb.ModelInferResponse{ModelName: "llm", ModelVersion: "1", Id: id, Parameters: params}
	if outputs {
		r.Outputs = []*kservepb.ModelInferResponse_InferOutputTensor{{Name: "token", Datatype: "INT32", Shape: []int64{1}}}
		r.RawOutputContents = [][]byte{bytes.Repeat([]byte{7}, 4000)}
	}
	return &kservepb.ModelStreamInferResponse{InferResponse: r}
}

func boolParam(v bool) *kservepb.InferParameter {
	return &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: v}}
}

func int64Param(v int64) *kservepb.InferParameter {
	return &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: v}}
}

// field appends one length-delimited field to b.
func field(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// finalEntry is one parameters entry {triton_final_response: value}, with
// value's bytes as given (several InferParameter occurrences merge).
func finalEntry(values ...[]byte) []byte {
	e := field(nil, mapEntryKey, []byte(FinalResponseParameter))
	for _, v := range values {
		e = field(e, mapEntryValue, v)
	}
	return e
}

func TestScanInferRequest(t *testing.T) {
	withID := inferRequest("llm", "2", 300)
	withID.Id = "req-7"
	noID := inferRequest("llm", "", 10)
	noID.Id = ""
	cases := []struct {
		name               string
		in                 []byte
		model, version, id string
		hasID              bool
	}{
		{"with id", marshal(t, withID), "llm", "2", "req-7", true},
		{"without id", marshal(t, noID), "llm", "", "", false},
		// proto3: the last occurrence wins, even after the tensors.
		{"id repeated after tensors", field(marshal(t, withID), inferID, []byte("req-8")), "llm", "2", "req-8", true},
		{"empty", nil, "", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, info InferRequestInfo, err error) {
				t.Helper()
				if err != nil || string(info.Model) != tc.model || string(info.Version) != tc.version ||
					string(info.ID) != tc.id || (info.ID != nil) != tc.hasID {
					t.Fatalf("%s: got (%q, %q, %q, %v), want (%q, %q, %q)", how, info.Model, info.Version, info.ID, err,
						tc.model, tc.version, tc.id)
				}
			}
			info, err := ScanInferRequest(tc.in)
			check("flat", info, err)
			for cut := range len(tc.in) {
				info, err := ScanInferRequestChunks([][]byte{tc.in[:cut], nil, tc.in[cut:]})
				check("chunks", info, err)
			}
		})
	}
}

func TestScanStreamResponse(t *testing.T) {
	final := map[string]*kservepb.InferParameter{FinalResponseParameter: boolParam(true)}
	notFinal := map[string]*kservepb.InferParameter{FinalResponseParameter: boolParam(false), "other": boolParam(true)}
	token := marshal(t, streamResp("a", notFinal, true))
	inner := marshal(t, streamResp("a", nil, true).InferResponse)
	cases := []struct {
		name string
		in   []byte
		want StreamResponseInfo
	}{
		{"token, not final", token, StreamResponseInfo{ID: []byte("a"), HasFinal: true}},
		{"last token, final", marshal(t, streamResp("a", final, true)), StreamResponseInfo{ID: []byte("a"), HasFinal: true, Final: true}},
		// Triton's empty final response (triton_enable_empty_final_response).
		{"empty final", marshal(t, streamResp("a", final, false)), StreamResponseInfo{ID: []byte("a"), HasFinal: true, Final: true, Empty: true}},
		// A model that is not decoupled: no flag at all.
		{"no flag, no id", marshal(t, streamResp("", nil, true)), StreamResponseInfo{}},
		{"error", marshal(t, &kservepb.ModelStreamInferResponse{ErrorMessage: "boom",
			InferResponse: &kservepb.ModelInferResponse{Id: "a", Parameters: final}}),
			StreamResponseInfo{ID: []byte("a"), Error: true, HasFinal: true, Final: true, Empty: true}},
		{"no infer_response", nil, StreamResponseInfo{Empty: true}},
		{"flag holds an int64", marshal(t, streamResp("a", map[string]*kservepb.InferParameter{FinalResponseParameter: int64Param(1)}, true)),
			StreamResponseInfo{ID: []byte("a"), HasFinal: true}},
		// Hand-built layouts proto.Marshal never writes but must read.
		{"same key twice, last wins", field(nil, streamInferResponse, concat(
			field(nil, inferID, []byte("b")),
			field(nil, inferParameters, finalEntry(marshal(t, boolParam(true)))),
			field(nil, inferParameters, finalEntry(marshal(t, boolParam(false)))))),
			StreamResponseInfo{ID: []byte("b"), HasFinal: true, Empty: true}},
		{"value occurrences merge: int64 then bool", field(nil, streamInferResponse,
			field(nil, inferParameters, finalEntry(marshal(t, int64Param(3)), marshal(t, boolParam(true))))),
			StreamResponseInfo{HasFinal: true, Final: true, Empty: true}},
		{"value occurrences merge: bool then int64", field(nil, streamInferResponse,
			field(nil, inferParameters, finalEntry(marshal(t, boolParam(true)), marshal(t, int64Param(3))))),
			StreamResponseInfo{HasFinal: true, Empty: true}},
		{"key without value", field(nil, streamInferResponse, field(nil, inferParameters, finalEntry())),
			StreamResponseInfo{HasFinal: true, Empty: true}},
		{"infer_response twice merges", concat(field(nil, streamInferResponse, inner),
			field(nil, streamInferResponse, field(nil, inferParameters, finalEntry(marshal(t, boolParam(true)))))),
			StreamResponseInfo{ID: []byte("a"), HasFinal: true, Final: true}},
		{"error message cleared", concat(field(nil, streamErrorMessage, []byte("x")), field(nil, streamErrorMessage, nil)),
			StreamResponseInfo{Empty: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, got StreamResponseInfo, err error) {
				t.Helper()
				if err != nil || !bytes.Equal(got.ID, tc.want.ID) || got.Error != tc.want.Error || got.HasFinal != tc.want.HasFinal ||
					got.Final != tc.want.Final || got.Empty != tc.want.Empty {
					t.Fatalf("%s: got %+v (id %q), %v; want %+v", how, got, got.ID, err, tc.want)
				}
			}
			got, err := ScanStreamResponse(tc.in)
			check("flat", got, err)
			for cut := range len(tc.in) {
				got, err := ScanStreamResponseChunks([][]byte{tc.in[:cut], nil, tc.in[cut:]})
				check("chunks", got, err)
			}
			checkAgainstProto(t, tc.in)
		})
	}
}

func TestStreamScannersMalformed(t *testing.T) {
	resp := marshal(t, streamResp("a", map[string]*kservepb.InferParameter{FinalResponseParameter: boolParam(true)}, true))
	cases := []struct {
		name string
		in   []byte
	}{
		{"truncated", resp[:len(resp)-5]},
		{"field number zero", []byte{0x02, 0x00}},
		{"varint overflow", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"length past end", []byte{0x12, 0x05, 'a'}},
		{"end group at top", []byte{0x0c}},
		{"reserved wire type", []byte{0x0e}},
		{"bad infer_response", field(nil, streamInferResponse, []byte{0x1a, 0x09})},
		{"bad parameters entry", field(nil, streamInferResponse, field(nil, inferParameters, []byte{0x0a, 0x09}))},
		{"bad flag value", field(nil, streamInferResponse, field(nil, inferParameters, finalEntry([]byte{0x08})))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ScanStreamResponse(tc.in); !errors.Is(err, ErrMalformed) {
				t.Errorf("ScanStreamResponse: got %v, want ErrMalformed", err)
			}
			// The request scanner does not look inside field 2 (the
			// version), so the nested cases are valid requests.
			_, err := ScanInferRequest(tc.in)
			if nested := strings.HasPrefix(tc.name, "bad "); nested {
				if err != nil {
					t.Errorf("ScanInferRequest: %v", err)
				}
			} else if !errors.Is(err, ErrMalformed) {
				t.Errorf("ScanInferRequest: got %v, want ErrMalformed", err)
			}
		})
	}
}

// checkAgainstProto checks that ScanStreamResponse agrees with
// proto.Unmarshal wherever that accepts b, and that its chunk form agrees
// with it.
func checkAgainstProto(t *testing.T, b []byte) {
	t.Helper()
	got, err := ScanStreamResponse(b)
	var msg kservepb.ModelStreamInferResponse
	if proto.Unmarshal(b, &msg) == nil {
		if err != nil {
			t.Fatalf("proto accepts %x, ScanStreamResponse fails: %v", b, err)
		}
		ir := msg.GetInferResponse()
		p, has := ir.GetParameters()[FinalResponseParameter]
		want := StreamResponseInfo{ID: []byte(ir.GetId()), Error: msg.ErrorMessage != "", HasFinal: has,
			Final: p.GetBoolParam(), Empty: len(ir.GetOutputs()) == 0 && len(ir.GetRawOutputContents()) == 0}
		if string(got.ID) != string(want.ID) || got.Error != want.Error || got.HasFinal != want.HasFinal ||
			got.Final != want.Final || got.Empty != want.Empty {
			t.Fatalf("%x: got %+v, proto says %+v", b, got, want)
		}
	}
	for seed := range byte(3) {
		g2, err2 := ScanStreamResponseChunks(split(b, seed))
		if (err == nil) != (err2 == nil) || string(g2.ID) != string(got.ID) || g2.Final != got.Final ||
			g2.HasFinal != got.HasFinal || g2.Error != got.Error || g2.Empty != got.Empty {
			t.Fatalf("%x: flat %+v %v, chunks %+v %v", b, got, err, g2, err2)
		}
	}
}

// FuzzScanStreamResponse checks that the response scanner never panics,
// agrees with proto.Unmarshal whenever that accepts the bytes, and reads
// the same from any cut into chunks.
func FuzzScanStreamResponse(f *testing.F) {
	f.Add(marshal(f, streamResp("a", map[string]*kservepb.InferParameter{FinalResponseParameter: boolParam(true)}, true)))
	f.Add(marshal(f, streamResp("", map[string]*kservepb.InferParameter{FinalResponseParameter: int64Param(1)}, false)))
	f.Add(field(nil, streamInferResponse, field(nil, inferParameters, finalEntry(marshal(f, boolParam(true)), marshal(f, int64Param(3))))))
	f.Fuzz(func(t *testing.T, b []byte) { checkAgainstProto(t, b) })
}

// FuzzScanInferRequest checks the request scanner against proto.Unmarshal
// and its chunk form against the flat one.
func FuzzScanInferRequest(f *testing.F) {
	req := inferRequest("llm", "1", 64)
	req.Id = "x"
	f.Add(marshal(f, req), byte(1))
	f.Add(field(marshal(f, req), inferID, []byte("y")), byte(4))
	f.Fuzz(func(t *testing.T, b []byte, seed byte) {
		info, err := ScanInferRequest(b)
		var msg kservepb.ModelInferRequest
		if proto.Unmarshal(b, &msg) == nil {
			if err != nil {
				t.Fatalf("proto accepts the bytes, ScanInferRequest fails: %v", err)
			}
			if string(info.Model) != msg.ModelName || string(info.Version) != msg.ModelVersion || string(info.ID) != msg.Id {
				t.Fatalf("got (%q, %q, %q), proto says (%q, %q, %q)", info.Model, info.Version, info.ID, msg.ModelName, msg.ModelVersion, msg.Id)
			}
		}
		i2, err2 := ScanInferRequestChunks(split(b, seed))
		if (err == nil) != (err2 == nil) || !bytes.Equal(info.ID, i2.ID) || !bytes.Equal(info.Model, i2.Model) || !bytes.Equal(info.Version, i2.Version) {
			t.Fatalf("flat (%+v, %v), chunks (%+v, %v)", info, err, i2, err2)
		}
	})
}
