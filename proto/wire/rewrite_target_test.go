package wire

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func TestRewriteModelInferTarget(t *testing.T) {
	cases := []struct {
		name    string
		msg     proto.Message
		version string
	}{
		{"infer, new version", inferRequest("simple", "1", 100), "3"},
		{"infer, version cleared", inferRequest("simple", "1", 100), ""},
		{"infer without version", inferRequest("simple", "", 10), "2"},
		{"no name", inferRequest("", "2", 10), "4"},
		{"empty message", &kservepb.ModelInferRequest{}, "5"},
		{"metadata", &kservepb.ModelMetadataRequest{Name: "a", Version: "1"}, "9"},
		{"ready", &kservepb.ModelReadyRequest{Name: "a"}, "latest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := marshal(t, tc.msg)
			orig := bytes.Clone(in)
			out, err := RewriteModelInferTarget(in, "simple_fallback", tc.version)
			if err != nil {
				t.Fatalf("RewriteModelInferTarget: %v", err)
			}
			if !bytes.Equal(in, orig) {
				t.Fatal("input modified")
			}
			// Every field of the original but fields 1 and 2 must survive.
			want := proto.Clone(tc.msg)
			fields := want.ProtoReflect().Descriptor().Fields()
			want.ProtoReflect().Set(fields.ByNumber(1), protoreflect.ValueOfString("simple_fallback"))
			want.ProtoReflect().Set(fields.ByNumber(2), protoreflect.ValueOfString(tc.version))
			got := want.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(out, got); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			// Name and version are fields 1 and 2, written first: a
			// deterministic marshal of the expected message is what a
			// rewrite keeping every other field in order must produce.
			if !bytes.Equal(out, marshal(t, want)) {
				t.Error("rewritten bytes differ from a deterministic marshal of the expected message")
			}
			if m, v, err := ModelInferTarget(out); err != nil || m != "simple_fallback" || v != tc.version {
				t.Errorf("ModelInferTarget after rewrite = (%q, %q, %v)", m, v, err)
			}
		})
	}
	t.Run("duplicates removed", func(t *testing.T) {
		in := concat(marshal(t, inferRequest("a", "1", 4)), marshal(t, &kservepb.ModelInferRequest{ModelName: "b", ModelVersion: "7", Id: "x"}))
		out, err := RewriteModelInferTarget(in, "c", "8")
		if err != nil {
			t.Fatal(err)
		}
		var want kservepb.ModelInferRequest
		if err := proto.Unmarshal(in, &want); err != nil {
			t.Fatal(err)
		}
		want.ModelName, want.ModelVersion = "c", "8"
		var got kservepb.ModelInferRequest
		if err := proto.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, &want) {
			t.Errorf("got %v, want %v", &got, &want)
		}
		if n := bytes.Count(out, []byte{0x12, 0x01, '8'}); n != 1 {
			t.Errorf("new version written %d times", n)
		}
		if bytes.Contains(out, []byte{0x12, 0x01, '7'}) || bytes.Contains(out, []byte{0x12, 0x01, '1'}) {
			t.Error("an old version survived")
		}
	})
	t.Run("version field of another wire type kept", func(t *testing.T) {
		// A varint field 2 is an unknown field to proto, kept as the name
		// rewrite keeps a varint field 1.
		in := concat(marshal(t, inferRequest("a", "1", 4)), []byte{0x10, 0x05})
		out, err := RewriteModelInferTarget(in, "b", "")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasSuffix(out, []byte{0x10, 0x05}) {
			t.Error("unknown varint field 2 dropped")
		}
		if m, v, err := ModelInferTarget(out); err != nil || m != "b" || v != "" {
			t.Errorf("ModelInferTarget after rewrite = (%q, %q, %v)", m, v, err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		good := marshal(t, inferRequest("simple", "1", 16))
		for _, in := range [][]byte{good[:len(good)-3], {0x02, 0x00}, {0x0a, 0x05, 'a'}, {0x0c}, {0x0e}} {
			if _, err := RewriteModelInferTarget(in, "x", "1"); !errors.Is(err, ErrMalformed) {
				t.Errorf("%x: got %v, want ErrMalformed", in, err)
			}
		}
	})
}

// TestRewriteModelInferNameKeepsVersion pins what the thin wrapper must not
// change: the name rewrite leaves every version field where it was.
func TestRewriteModelInferNameKeepsVersion(t *testing.T) {
	in := concat(marshal(t, inferRequest("a", "1", 4)), marshal(t, &kservepb.ModelInferRequest{ModelVersion: "2"}))
	out, err := RewriteModelInferName(in, "b")
	if err != nil {
		t.Fatal(err)
	}
	want := concat([]byte{0x0a, 0x01, 'b'}, bytes.ReplaceAll(in, []byte{0x0a, 0x01, 'a'}, nil))
	if !bytes.Equal(out, want) {
		t.Errorf("got %x, want %x", out, want)
	}
}

// specWith returns s with its version_choice set from version as
// RewritePredictTarget sets it.
func specWith(s *tfservingpb.ModelSpec, name string, kind protowire.Number, v int64, label string) *tfservingpb.ModelSpec {
	s = proto.Clone(s).(*tfservingpb.ModelSpec)
	if s == nil {
		s = &tfservingpb.ModelSpec{}
	}
	s.Name = name
	switch kind {
	case specVersion:
		s.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(v)}
	case specVersionLabel:
		s.VersionChoice = &tfservingpb.ModelSpec_VersionLabel{VersionLabel: label}
	default:
		s.VersionChoice = nil
	}
	return s
}

func TestRewritePredictTarget(t *testing.T) {
	withVersion := &tfservingpb.ModelSpec{Name: "half_plus_two", SignatureName: "serving_default",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(7)}}
	withLabel := &tfservingpb.ModelSpec{Name: "m", SignatureName: "sig",
		VersionChoice: &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "canary"}}
	versions := []struct {
		in       string
		kind     protowire.Number
		v        int64
		label    string
		readBack string
	}{
		{"3", specVersion, 3, "", "3"},
		{"0", specVersion, 0, "", "0"},
		{"-2", specVersion, -2, "", "-2"},
		{"9223372036854775807", specVersion, 1<<63 - 1, "", "9223372036854775807"},
		{"07", specVersion, 7, "", "7"},
		{"stable", specVersionLabel, 0, "stable", "stable"},
		{"9223372036854775808", specVersionLabel, 0, "9223372036854775808", "9223372036854775808"},
		{"1.5", specVersionLabel, 0, "1.5", "1.5"},
		{"", 0, 0, "", ""},
	}
	inputs := []struct {
		name string
		in   []byte
	}{
		{"version", marshal(t, predictRequest(withVersion))},
		{"label", marshal(t, predictRequest(withLabel))},
		{"no model spec", marshal(t, predictRequest(nil))},
		{"empty", nil},
		// Merged specs: a version in the first and a label in the second
		// (the label wins the oneof) must both go.
		{"merged specs", concat(marshal(t, predictRequest(withVersion)), marshal(t, &tfservingpb.PredictRequest{
			ModelSpec: &tfservingpb.ModelSpec{Name: "second", SignatureName: "sig2",
				VersionChoice: &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "old"}}}))},
		{"metadata request", marshal(t, &tfservingpb.GetModelMetadataRequest{ModelSpec: withLabel, MetadataField: []string{"signature_def"}})},
	}
	for _, in := range inputs {
		for _, ver := range versions {
			t.Run(in.name+"/"+ver.in, func(t *testing.T) {
				orig := bytes.Clone(in.in)
				out, err := RewritePredictTarget(in.in, "fallback", ver.in)
				if err != nil {
					t.Fatalf("RewritePredictTarget: %v", err)
				}
				if !bytes.Equal(in.in, orig) {
					t.Fatal("input modified")
				}
				want := specHolder(in.name)
				if err := proto.Unmarshal(in.in, want); err != nil {
					t.Fatal(err)
				}
				spec := specWith(want.GetModelSpec(), "fallback", ver.kind, ver.v, ver.label)
				want.ProtoReflect().Set(want.ProtoReflect().Descriptor().Fields().ByNumber(1), protoreflect.ValueOfMessage(spec.ProtoReflect()))
				got := specHolder(in.name)
				if err := proto.Unmarshal(out, got); err != nil {
					t.Fatalf("unmarshal: %v", err)
				}
				if !proto.Equal(got, want) {
					t.Errorf("got %v, want %v", got, want)
				}
				if m, v, err := PredictTarget(out); err != nil || m != "fallback" || v != ver.readBack {
					t.Errorf("PredictTarget after rewrite = (%q, %q, %v), want (%q, %q)", m, v, err, "fallback", ver.readBack)
				}
			})
		}
	}
	t.Run("byte exact", func(t *testing.T) {
		// Go's marshal writes name=1, signature_name=3, then the oneof
		// member version=2; the rewrite writes the name first, keeps the
		// rest in order and writes the version last.
		in := marshal(t, predictRequest(withVersion))
		out, err := RewritePredictTarget(in, "fallback", "300")
		if err != nil {
			t.Fatal(err)
		}
		spec := specWith(withVersion, "fallback", specVersion, 300, "")
		if want := marshal(t, predictRequest(spec)); !bytes.Equal(out, want) {
			t.Errorf("rewritten bytes differ from a deterministic marshal of the expected message")
		}
		in = marshal(t, predictRequest(withVersion))
		out, err = RewritePredictTarget(in, "fallback", "beta")
		if err != nil {
			t.Fatal(err)
		}
		spec = specWith(withVersion, "fallback", specVersionLabel, 0, "beta")
		if want := marshal(t, predictRequest(spec)); !bytes.Equal(out, want) {
			t.Errorf("label: rewritten bytes differ from a deterministic marshal of the expected message")
		}
	})
	t.Run("bad Int64Value replaced", func(t *testing.T) {
		// The old version is dropped unread, so its damage goes with it.
		in := []byte{0x0a, 0x03, 0x12, 0x01, 0x08}
		if _, _, err := PredictTarget(in); !errors.Is(err, ErrMalformed) {
			t.Fatalf("PredictTarget: %v", err)
		}
		out, err := RewritePredictTarget(in, "m", "2")
		if err != nil {
			t.Fatal(err)
		}
		if m, v, err := PredictTarget(out); err != nil || m != "m" || v != "2" {
			t.Errorf("PredictTarget after rewrite = (%q, %q, %v)", m, v, err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		good := marshal(t, predictRequest(withVersion))
		for _, in := range [][]byte{good[:len(good)-1], {0x02, 0x00}, {0x0a, 0x05, 'a'}, {0x0c}, {0x0e}, {0x0a, 0x02, 0x0a, 0x05}} {
			if _, err := RewritePredictTarget(in, "x", "1"); !errors.Is(err, ErrMalformed) {
				t.Errorf("%x: got %v, want ErrMalformed", in, err)
			}
		}
	})
}
