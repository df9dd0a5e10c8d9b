package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/grpcwire/prefix"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// grpcFrame returns msg behind its gRPC message prefix (not compressed).
func grpcFrame(msg []byte) []byte {
	return grpcFrameFlag(0, msg)
}

// grpcFrameFlag is grpcFrame with the given compressed flag.
func grpcFrameFlag(flag byte, msg []byte) []byte {
	out := make([]byte, prefix.Len, prefix.Len+len(msg))
	out[0] = flag
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// wholeTarget is the whole-message function a scanner of kind agrees with.
func wholeTarget(kind TargetKind) func([]byte) (string, string, error) {
	if kind == KServeTarget {
		return ModelInferTarget
	}
	return PredictTarget
}

// cutLen turns one byte of a fuzzer's list of cuts into a chunk length:
// 0 to 191 bytes (0 is an empty chunk), or 1 to 64 KiB for the bytes
// above, so that a short list still cuts a big message.
func cutLen(c byte) int {
	if c < 0xc0 {
		return int(c)
	}
	return int(c-0xbf) << 10
}

// feedCuts feeds body to a new scanner of kind in the chunks that cuts
// gives (the rest, once cuts runs out, in one chunk). Each chunk is a copy
// that is overwritten after Feed, so a scanner that kept a reference to a
// chunk would be caught. It returns the scanner and Feed's first error.
func feedCuts(kind TargetKind, body, cuts []byte) (*TargetScanner, error) {
	s := NewTargetScanner(kind)
	var err error
	feed := func(p []byte) {
		c := bytes.Clone(p)
		if e := s.Feed(c); e != nil && err == nil {
			err = e
		}
		for i := range c {
			c[i] = 0xa5
		}
	}
	for _, c := range cuts {
		n := min(cutLen(c), len(body))
		feed(body[:n])
		body = body[n:]
	}
	feed(body)
	return s, err
}

// feedBytewise feeds body one byte at a time and returns the scanner and
// the index of the byte after which the target became known (-1: never).
func feedBytewise(t *testing.T, kind TargetKind, body []byte) (*TargetScanner, int) {
	t.Helper()
	s := NewTargetScanner(kind)
	at := -1
	for i := range body {
		if err := s.Feed(body[i : i+1]); err != nil {
			t.Fatalf("Feed byte %d: %v", i, err)
		}
		if at < 0 && s.Known() {
			at = i
		}
	}
	return s, at
}

func spec(name string, version *int64, label string) *tfservingpb.ModelSpec {
	s := &tfservingpb.ModelSpec{Name: name}
	if version != nil {
		s.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(*version)}
	} else if label != "" {
		s.VersionChoice = &tfservingpb.ModelSpec_VersionLabel{VersionLabel: label}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func TestTargetScanner(t *testing.T) {
	a := marshal(t, inferRequest("simple", "1", 4096))
	lateName := concat(marshal(t, inferRequest("", "", 4096)), field(nil, kserveName, []byte("late")))
	p3 := marshal(t, predictRequest(spec("half_plus_two", ptr[int64](3), "")))
	cases := []struct {
		name string
		kind TargetKind
		msg  []byte
		// reported is the target the scanner reports when it becomes
		// known; changed is Changed at the end.
		reportedModel, reportedVersion string
		changed                        bool
	}{
		{"infer", KServeTarget, a, "simple", "1", false},
		{"no version", KServeTarget, marshal(t, inferRequest("resnet", "", 64)), "resnet", "", false},
		{"empty message", KServeTarget, nil, "", "", false},
		{"metadata request", KServeTarget, marshal(t, &kservepb.ModelMetadataRequest{Name: "m", Version: "2"}), "m", "2", false},
		// Known only at the end: the name follows the tensors.
		{"name after inputs", KServeTarget, lateName, "late", "", false},
		{"second name", KServeTarget, concat(a, marshal(t, &kservepb.ModelInferRequest{ModelName: "other"})), "simple", "1", true},
		{"second version", KServeTarget, concat(a, field(nil, kserveVersion, []byte("2"))), "simple", "1", true},
		{"same name again", KServeTarget, concat(a, field(nil, kserveName, []byte("simple"))), "simple", "1", false},
		{"name changed and back", KServeTarget, concat(a, field(nil, kserveName, []byte("x")), field(nil, kserveName, []byte("simple"))), "simple", "1", true},
		// Within the leading run the last occurrence is what is reported.
		{"two names up front", KServeTarget, concat(field(nil, kserveName, []byte("a")), field(nil, kserveName, []byte("b")), a[len(field(nil, kserveName, []byte("simple"))):]), "b", "1", false},
		{"version before name", KServeTarget, concat(field(nil, kserveVersion, []byte("7")), field(nil, kserveName, []byte("m")), field(nil, inferID, []byte("id"))), "m", "7", false},

		{"predict version", TFServingTarget, p3, "half_plus_two", "3", false},
		{"predict label", TFServingTarget, marshal(t, predictRequest(spec("m", nil, "stable"))), "m", "stable", false},
		{"predict no spec", TFServingTarget, marshal(t, predictRequest(nil)), "", "", false},
		{"predict negative version", TFServingTarget, marshal(t, predictRequest(spec("m", ptr[int64](-5), ""))), "m", "-5", false},
		{"metadata request spec", TFServingTarget, marshal(t, &tfservingpb.GetModelMetadataRequest{ModelSpec: spec("m", ptr[int64](1), "")}), "m", "1", false},
		// A later model_spec with only a version merges into the first
		// one's name, and changes the version.
		{"spec twice, version later", TFServingTarget, concat(p3, marshal(t, &tfservingpb.PredictRequest{ModelSpec: spec("", ptr[int64](4), "")})), "half_plus_two", "3", true},
		{"spec twice, same values", TFServingTarget, concat(p3, marshal(t, &tfservingpb.PredictRequest{ModelSpec: spec("half_plus_two", ptr[int64](3), "")})), "half_plus_two", "3", false},
		{"spec twice, label later", TFServingTarget, concat(p3, marshal(t, &tfservingpb.PredictRequest{ModelSpec: spec("", nil, "canary")})), "half_plus_two", "3", true},
		{"spec twice up front", TFServingTarget, concat(marshal(t, &tfservingpb.PredictRequest{ModelSpec: spec("m", nil, "")}),
			marshal(t, &tfservingpb.PredictRequest{ModelSpec: spec("", ptr[int64](9), "")}), p3[len(marshal(t, &tfservingpb.PredictRequest{ModelSpec: spec("half_plus_two", ptr[int64](3), "")})):]), "m", "9", false},
		{"spec after inputs", TFServingTarget, concat(marshal(t, predictRequest(nil)), marshal(t, &tfservingpb.PredictRequest{ModelSpec: spec("late", nil, "l")})), "late", "l", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wm, wv, werr := wholeTarget(tc.kind)(tc.msg)
			if werr != nil {
				t.Fatalf("whole-message function: %v", werr)
			}
			body := grpcFrame(tc.msg)
			for _, cuts := range [][]byte{nil, {3}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 7, 0, 0, 2}, {6, 0xc0, 5}} {
				s, err := feedCuts(tc.kind, body, cuts)
				if err != nil || s.End() != nil {
					t.Fatalf("cuts %v: Feed %v, End %v", cuts, err, s.End())
				}
				if !s.Done() || !s.Known() || s.Messages() != 1 {
					t.Fatalf("cuts %v: Done %v Known %v Messages %d", cuts, s.Done(), s.Known(), s.Messages())
				}
				if m, v := s.Target(); m != wm || v != wv {
					t.Fatalf("cuts %v: Target (%q, %q), whole (%q, %q)", cuts, m, v, wm, wv)
				}
				if m, v := s.Reported(); m != tc.reportedModel || v != tc.reportedVersion || s.Changed() != tc.changed {
					t.Fatalf("cuts %v: Reported (%q, %q) Changed %v, want (%q, %q) %v", cuts, m, v, s.Changed(),
						tc.reportedModel, tc.reportedVersion, tc.changed)
				}
			}
		})
	}
}

// TestTargetScannerKnownEarly: a request as serializers write it is known
// at the tag after its version, long before its tensors have arrived.
func TestTargetScannerKnownEarly(t *testing.T) {
	cases := []struct {
		name string
		kind TargetKind
		msg  []byte
		// at is the message byte after which the target is known.
		at int
	}{
		// 0a 06 simple 12 01 1 1a: the tag of id.
		{"infer", KServeTarget, marshal(t, inferRequest("simple", "1", 1<<20)), 2 + 6 + 2 + 1},
		// 0a 06 simple 22: the tag of parameters (no version, no id).
		{"infer no version", KServeTarget, marshal(t, &kservepb.ModelInferRequest{ModelName: "simple",
			Inputs: []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x"}}, RawInputContents: [][]byte{make([]byte, 1<<20)}}), 2 + 6},
		// 0a 0b [0a 01 m 12 02 08 01 1a 02 sd] 12: the tag of inputs.
		{"predict", TFServingTarget, marshal(t, &tfservingpb.PredictRequest{
			ModelSpec: &tfservingpb.ModelSpec{Name: "m", SignatureName: "sd", VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(1)}},
			Inputs:    map[string]*tensorflowpb.TensorProto{"x": {TensorContent: make([]byte, 1<<20)}}}), 2 + 11},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, at := feedBytewise(t, tc.kind, grpcFrame(tc.msg))
			if at != prefix.Len+tc.at {
				t.Fatalf("known after body byte %d, want %d", at, prefix.Len+tc.at)
			}
			if !s.Done() || s.Changed() {
				t.Fatalf("Done %v Changed %v", s.Done(), s.Changed())
			}
			wm, wv, _ := wholeTarget(tc.kind)(tc.msg)
			if m, v := s.Reported(); m != wm || v != wv {
				t.Fatalf("Reported (%q, %q), want (%q, %q)", m, v, wm, wv)
			}
		})
	}
}

func TestTargetScannerErrors(t *testing.T) {
	name := field(nil, kserveName, []byte("m"))
	cases := []struct {
		name string
		kind TargetKind
		body []byte
		// want is the sentinel the error must wrap; early means Feed
		// fails before the message's bytes are all there (the body is
		// cut one byte short of them).
		want  error
		early bool
	}{
		{"length past the message end", KServeTarget, grpcFrame(concat(name, []byte{0x3a, 0x64}, make([]byte, 10))), ErrMalformed, true},
		{"length past the model_spec end", TFServingTarget, grpcFrame(concat([]byte{0x0a, 0x03, 0x0a, 0x05, 'm'}, make([]byte, 10))), ErrMalformed, true},
		{"varint over 10 bytes", KServeTarget, grpcFrame(concat(name, []byte{0x18}, bytes.Repeat([]byte{0xff}, 10), []byte{0x01})), ErrMalformed, true},
		{"varint overflows", KServeTarget, grpcFrame(concat(name, []byte{0x18}, bytes.Repeat([]byte{0xff}, 9), []byte{0x02})), ErrMalformed, false},
		{"tag cut by the message end", KServeTarget, grpcFrame(concat(name, []byte{0x80})), ErrMalformed, false},
		{"value cut by the Int64Value end", TFServingTarget, grpcFrame([]byte{0x0a, 0x04, 0x12, 0x02, 0x08, 0x80}), ErrMalformed, false},
		{"fixed64 past the end", KServeTarget, grpcFrame(concat(name, []byte{0x19, 1, 2, 3})), ErrMalformed, false},
		{"field number 0", KServeTarget, grpcFrame(concat(name, []byte{0x02, 0x00})), ErrMalformed, true},
		{"end group", KServeTarget, grpcFrame(concat(name, []byte{0x1c})), ErrMalformed, false},
		{"wire type 6", KServeTarget, grpcFrame(concat(name, []byte{0x1e})), ErrMalformed, false},
		{"group", KServeTarget, grpcFrame(concat(name, []byte{0x1b, 0x08, 0x01, 0x1c})), ErrGroup, true},
		{"group in model_spec", TFServingTarget, grpcFrame([]byte{0x0a, 0x02, 0x1b, 0x1c}), ErrGroup, true},
		{"name over the cap", KServeTarget, grpcFrame(field(nil, kserveName, make([]byte, MaxTargetLen+1))), ErrTargetTooLong, true},
		{"later name over the cap", KServeTarget, grpcFrame(concat(name, field(nil, kserveName, make([]byte, MaxTargetLen+1)))), ErrTargetTooLong, true},
		{"label over the cap", TFServingTarget, grpcFrame(marshal(t, predictRequest(spec("m", nil, strings.Repeat("l", MaxTargetLen+1))))), ErrTargetTooLong, true},
		{"compressed", KServeTarget, grpcFrameFlag(1, name), ErrCompressed, true},
		{"flag 2", KServeTarget, grpcFrameFlag(2, name), ErrMalformed, true},
		{"flag 2 on the second message", KServeTarget, concat(grpcFrame(name), grpcFrameFlag(2, name)), ErrMalformed, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var uwant error = ErrMalformed
			if tc.want != ErrMalformed {
				uwant = ErrUnroutable
			}
			for _, cuts := range [][]byte{nil, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}} {
				body := tc.body
				if tc.early {
					body = body[:len(body)-1]
				}
				s, err := feedCuts(tc.kind, body, cuts)
				if !errors.Is(err, tc.want) || !errors.Is(err, uwant) {
					t.Fatalf("cuts %v: Feed error %v, want %v", cuts, err, tc.want)
				}
				if uwant == ErrUnroutable && errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v wraps ErrMalformed", err)
				}
				if s.Feed([]byte{0}) != err || s.End() != err || s.Err() != err {
					t.Fatal("the error does not stick")
				}
			}
		})
	}
}

func TestTargetScannerCapIsInclusive(t *testing.T) {
	long := strings.Repeat("n", MaxTargetLen)
	s, err := feedCuts(KServeTarget, grpcFrame(marshal(t, inferRequest(long, long, 8))), []byte{100, 0xff})
	if err != nil {
		t.Fatal(err)
	}
	if m, v := s.Target(); m != long || v != long {
		t.Fatal("a name of MaxTargetLen bytes is not read back")
	}
}

func TestTargetScannerEnd(t *testing.T) {
	msg := marshal(t, inferRequest("m", "1", 100))
	cases := []struct {
		name string
		body []byte
		ok   bool
	}{
		{"whole message", grpcFrame(msg), true},
		{"no message", nil, true},
		{"body cut short", grpcFrame(msg)[:50], false},
		{"prefix cut short", grpcFrame(msg)[:3], false},
		{"second message cut short", concat(grpcFrame(msg), grpcFrame(msg)[:7]), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := feedCuts(KServeTarget, tc.body, []byte{2, 9})
			if err != nil {
				t.Fatalf("Feed: %v", err)
			}
			err = s.End()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrMalformed)) {
				t.Fatalf("End: %v", err)
			}
		})
	}
}

// TestTargetScannerMessages: a second message counts from its first byte,
// is framed but not read, and changes nothing of the first.
func TestTargetScannerMessages(t *testing.T) {
	first := grpcFrame(marshal(t, inferRequest("a", "1", 64)))
	second := grpcFrameFlag(1, []byte("compressed, never read"))
	body := concat(first, second, grpcFrame(nil), grpcFrame(marshal(t, inferRequest("b", "", 0))))
	s := NewTargetScanner(KServeTarget)
	if err := s.Feed(body[:len(first)]); err != nil {
		t.Fatal(err)
	}
	if !s.Done() || s.Messages() != 1 {
		t.Fatalf("after the first message: Done %v Messages %d", s.Done(), s.Messages())
	}
	if err := s.Feed(body[len(first) : len(first)+1]); err != nil || s.Messages() != 2 {
		t.Fatalf("one byte more: %v, Messages %d", err, s.Messages())
	}
	if err := s.Feed(body[len(first)+1:]); err != nil || s.End() != nil {
		t.Fatalf("the rest: %v, End %v", err, s.End())
	}
	if m, v := s.Target(); s.Messages() != 4 || m != "a" || v != "1" || s.Changed() {
		t.Fatalf("Messages %d, Target (%q, %q), Changed %v", s.Messages(), m, v, s.Changed())
	}

	// An empty first message is done with its prefix.
	s.Reset(TFServingTarget)
	if err := s.Feed(grpcFrame(nil)); err != nil || !s.Done() || !s.Known() || s.Messages() != 1 {
		t.Fatalf("empty message: %v, Done %v, Known %v, Messages %d", err, s.Done(), s.Known(), s.Messages())
	}
}

func TestTargetScannerZeroKind(t *testing.T) {
	var s TargetScanner
	if err := s.Feed(grpcFrame(nil)); err == nil {
		t.Fatal("a scanner of no kind accepted bytes")
	}
}

// TestTargetScannerReset: a reused scanner starts afresh and, once its
// buffers have grown, scans a 1 MiB request in 16 KiB chunks without
// allocating.
func TestTargetScannerReset(t *testing.T) {
	chunks := cutEvery(grpcFrame(marshal(t, inferRequest("simple", "1", 1<<20))), 16<<10)
	s := NewTargetScanner(TFServingTarget)
	if err := s.Feed(grpcFrame(marshal(t, predictRequest(spec("m", nil, "x"))))); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		s.Reset(KServeTarget)
		for _, c := range chunks {
			if err := s.Feed(c); err != nil {
				t.Fatal(err)
			}
		}
	})
	if m, v := s.TargetBytes(); string(m) != "simple" || string(v) != "1" || !s.Done() || s.Changed() {
		t.Fatalf("after Reset: (%q, %q), Done %v, Changed %v", m, v, s.Done(), s.Changed())
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per scan", allocs)
	}
}

// cutEvery cuts b into chunks of n bytes.
func cutEvery(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		k := min(n, len(b))
		out, b = append(out, b[:k]), b[k:]
	}
	return out
}

// FuzzTargetScannerMatchesWhole feeds a message, behind its gRPC prefix and
// followed by a second, empty message, in the chunks a list of cuts gives
// (see cutLen), and checks the scanner against the whole-message functions
// for both kinds:
//
//   - where the whole-message function fails, Feed fails (before End);
//   - where it succeeds, either the scanner reads the same target, or it
//     declines the bytes with an error that wraps ErrUnroutable and not
//     ErrMalformed (a group, a value over MaxTargetLen);
//   - what the scanner reports (Known, Reported, Changed) does not depend
//     on the cuts, and a final target that differs from the reported one
//     is always flagged by Changed.
func FuzzTargetScannerMatchesWhole(f *testing.F) {
	big := inferRequest("simple", "1", 70000)
	f.Add(marshal(f, big), []byte{})
	f.Add(marshal(f, big), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add(marshal(f, big), []byte{7, 0xcf, 0, 0xff, 3})
	f.Add(marshal(f, &kservepb.ModelInferRequest{ModelName: "m", ModelVersion: "2", Id: "x"}), []byte{6, 2, 1})
	// model_name after the inputs; two model_name fields.
	f.Add(concat(marshal(f, inferRequest("", "", 70000)), field(nil, kserveName, []byte("late"))), []byte{9, 0xdf})
	f.Add(concat(marshal(f, big), marshal(f, &kservepb.ModelInferRequest{ModelName: "other"})), []byte{0xff, 0xff, 0xd0, 1, 1, 1})
	f.Add(concat(field(nil, kserveName, []byte("a")), field(nil, kserveVersion, []byte("1")), field(nil, kserveName, []byte("b"))), []byte{2, 2, 2})
	// TF-Serving: version, label, a big tensor, model_spec twice.
	f.Add(marshal(f, predictRequest(spec("half_plus_two", ptr[int64](1<<40), ""))), []byte{3, 1, 1, 1})
	f.Add(marshal(f, predictRequest(spec("m", nil, "stable"))), []byte{8})
	tf := predictRequest(spec("half_plus_two", ptr[int64](2), ""))
	tf.Inputs["x"] = &tensorflowpb.TensorProto{Dtype: tensorflowpb.DataType_DT_FLOAT, TensorContent: make([]byte, 70000)}
	f.Add(marshal(f, tf), []byte{12, 0xc4, 0xf0})
	f.Add(concat(marshal(f, predictRequest(spec("m", ptr[int64](3), ""))), marshal(f, &tfservingpb.PredictRequest{ModelSpec: spec("", ptr[int64](4), "")})), []byte{5, 5, 5, 5})
	f.Add(concat(marshal(f, &tfservingpb.PredictRequest{ModelSpec: spec("m", nil, "")}), marshal(f, &tfservingpb.PredictRequest{ModelSpec: spec("", nil, "l")}), marshal(f, predictRequest(nil))), []byte{1, 2, 3, 4, 5})
	// What the scanner declines or refuses.
	f.Add([]byte{0x0b, 0x08, 0x01, 0x0c, 0x0a, 0x01, 'm'}, []byte{2})
	f.Add(field(nil, kserveName, make([]byte, MaxTargetLen+1)), []byte{0xc3})
	f.Add([]byte{0x0a, 0x04, 0x12, 0x02, 0x08, 0x80}, []byte{1, 1, 1, 1, 1, 1, 1})
	f.Add(concat([]byte{0x18}, bytes.Repeat([]byte{0xff}, 9), []byte{0x02}), []byte{4})
	f.Fuzz(func(t *testing.T, msg, cuts []byte) {
		body := concat(grpcFrame(msg), grpcFrame(nil))
		for _, kind := range []TargetKind{KServeTarget, TFServingTarget} {
			wm, wv, werr := wholeTarget(kind)(msg)
			s, err := feedCuts(kind, body, cuts)
			if werr != nil {
				if err == nil {
					t.Fatalf("%v: whole fails (%v), scanner reads (%q, %q)", kind, werr, s.name, s.curVersion())
				}
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnroutable) {
					t.Fatalf("%v: error %v wraps neither ErrMalformed nor ErrUnroutable", kind, err)
				}
				continue
			}
			if err != nil {
				if errors.Is(err, ErrMalformed) || !(errors.Is(err, ErrGroup) || errors.Is(err, ErrTargetTooLong)) {
					t.Fatalf("%v: whole reads (%q, %q), scanner fails: %v", kind, wm, wv, err)
				}
				continue
			}
			if e := s.End(); e != nil || !s.Done() || !s.Known() || s.Messages() != 2 {
				t.Fatalf("%v: End %v, Done %v, Known %v, Messages %d", kind, e, s.Done(), s.Known(), s.Messages())
			}
			if m, v := s.Target(); m != wm || v != wv {
				t.Fatalf("%v: scanner (%q, %q), whole (%q, %q)", kind, m, v, wm, wv)
			}
			rm, rv := s.Reported()
			if (rm != wm || rv != wv) && !s.Changed() {
				t.Fatalf("%v: reported (%q, %q), ends as (%q, %q), Changed is false", kind, rm, rv, wm, wv)
			}
			one, err := feedCuts(kind, body, nil)
			if err != nil {
				t.Fatalf("%v: in one chunk: %v", kind, err)
			}
			if om, ov := one.Reported(); om != rm || ov != rv || one.Changed() != s.Changed() {
				t.Fatalf("%v: cut: reported (%q, %q) changed %v; in one chunk (%q, %q) %v",
					kind, rm, rv, s.Changed(), om, ov, one.Changed())
			}
		}
	})
}
