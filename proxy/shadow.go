package proxy

import (
	"context"
	"encoding/binary"
	"math"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/release"
)

// A shadow copy is the cheapest call in the proxy: sent after the
// client's answer went out, on its own goroutine, only if the byte budget
// and the target's flow-control gate have room at once (skipped, never
// queued, otherwise), never recorded as a client's call, and its answer
// compared with the client's off the call path.

// shadowWait bounds a copy whose client sent no deadline.
const shadowWait = 5 * time.Second

// shadow sends a copy of the call to the choice's shadow target and
// compares the answer with stable, the client's (already sent; shadow
// keeps it and the request from the buffer pools). It never waits.
func (r *releaseCall) shadow(stable *Frame) {
	p, c := r.p, r.c
	rel := r.choice.Release
	st := *r.choice.Shadow
	if st == (release.Target{}) {
		st = rel.Spec().Candidate // a shadow without a target copies to the candidate
	}
	t, err := r.target(&st)
	dl, hasDeadline := c.ctx.Deadline()
	wait := shadowWait
	if hasDeadline {
		wait = min(wait, time.Until(dl))
	}
	n := int64(c.req.Len() + stable.Len())
	if err != nil || wait <= 0 || !p.budget.TryTake(n) {
		p.shadowSkipped.Add(1)
		return
	}
	x := new(exchange)
	x.h = handle{p: p, up: t.up, model: t.model}
	if cfg := p.flow.on(); cfg != nil && methods.IsInference(c.method) {
		if g := t.up.gate(cfg, t.model); g != nil {
			md, _ := metadata.FromIncomingContext(c.ctx)
			x.h.fc = cfg.flowCall(md, nil, c.req.Bytes(), dl)
			if !g.TryAcquire(x.h.fc) {
				p.budget.GiveBack(n)
				p.shadowSkipped.Add(1)
				return
			}
			x.h.gate = g
		}
	}
	x.turned = true // its turn, taken above or needed by none: invoke gives it back
	c.keepReq.Store(true)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), wait)
	p.shadows.Add(1)
	go func() {
		defer p.shadows.Done()
		defer cancel()
		defer p.budget.GiveBack(n)
		r.runShadow(ctx, t, x, stable)
	}()
}

// runShadow makes the copy's one upstream call, observes its latency as
// the candidate's and its agreement with the stable answer.
func (r *releaseCall) runShadow(ctx context.Context, t target, x *exchange, stable *Frame) {
	c, rel := r.c, r.choice.Release
	b, err := rewriteTarget(c.kind, c.req.Bytes(), t.model, t.version)
	if err != nil {
		x.h.done(sent{}, 0, false)
		return
	}
	t0 := time.Now()
	_, err = r.p.invoke(ctx, t.up, c.method, NewFrame(b), x, c.subtype)
	took := time.Since(t0)
	rel.Observe(release.Candidate, sizeClass(r.rows), took, !releaseFailed(ctx, err))
	if err != nil {
		return
	}
	r.p.shadowCompared.Add(1)
	sh := rel.Spec().Shadow
	rel.ObserveShadow(sameAnswer(c.kind, stable.Bytes(), x.resp.Bytes(), sh.Compare == release.CompareTop1, sh.Tolerance))
	x.resp.Free()
}

// tensor is one output of an answer, as numbers.
type tensor struct {
	name  string
	shape []int64
	vals  []float64
}

// sameAnswer says whether two serialized answers of one request agree:
// every output by name, the top class of each row when top1 and the
// output looks like a classifier's ([rows, classes], classes > 1), every
// value within tol otherwise. Answers that cannot be read disagree.
func sameAnswer(kind wire.TargetKind, a, b []byte, top1 bool, tol release.Tolerance) bool {
	ta, oka := outputsOf(kind, a)
	tb, okb := outputsOf(kind, b)
	if !oka || !okb || len(ta) != len(tb) {
		return false
	}
	for _, x := range ta {
		var y *tensor
		for i := range tb {
			if tb[i].name == x.name {
				y = &tb[i]
			}
		}
		if y == nil || !sameShape(x.shape, y.shape) {
			return false
		}
		if n := len(x.shape); top1 && n >= 2 && x.shape[n-1] > 1 {
			agree, rows := release.Top1(x.vals, y.vals, int(x.shape[n-1]))
			if agree != rows {
				return false
			}
		} else if !release.CompareTensors(x.vals, y.vals, tol).Agree() {
			return false
		}
	}
	return true
}

func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// outputsOf decodes an answer's outputs: a KServe ModelInferResponse
// (raw_output_contents or typed contents) or a TF-Serving PredictResponse.
func outputsOf(kind wire.TargetKind, b []byte) ([]tensor, bool) {
	if kind == wire.TFServingTarget {
		var m tfservingpb.PredictResponse
		if proto.Unmarshal(b, &m) != nil {
			return nil, false
		}
		out := make([]tensor, 0, len(m.Outputs))
		for name, tp := range m.Outputs {
			t := tensor{name: name}
			for _, d := range tp.GetTensorShape().GetDim() {
				t.shape = append(t.shape, d.Size)
			}
			t.vals = tfValues(tp)
			out = append(out, t)
		}
		return out, true
	}
	var m kservepb.ModelInferResponse
	if proto.Unmarshal(b, &m) != nil {
		return nil, false
	}
	out := make([]tensor, len(m.Outputs))
	for i, o := range m.Outputs {
		out[i] = tensor{name: o.Name, shape: o.Shape}
		if i < len(m.RawOutputContents) {
			out[i].vals = rawValues(o.Datatype, m.RawOutputContents[i])
		} else if ct := o.Contents; ct != nil {
			out[i].vals = appendAll(nil, ct.Fp32Contents, ct.Fp64Contents, ct.IntContents, ct.Int64Contents,
				ct.UintContents, ct.Uint64Contents)
		}
	}
	return out, true
}

// tfValues is a TensorProto's values as numbers.
func tfValues(tp *tensorflowpb.TensorProto) []float64 {
	if len(tp.TensorContent) > 0 {
		return rawValues(tfDatatype[tp.Dtype], tp.TensorContent)
	}
	v := appendAll(nil, tp.FloatVal, tp.DoubleVal, tp.IntVal, tp.Int64Val, []int32(nil), []uint64(nil))
	for _, h := range tp.HalfVal {
		v = append(v, halfFloat(uint16(h)))
	}
	return v
}

// tfDatatype names TF-Serving's dtypes as KServe's datatypes, for raw
// tensor_content.
var tfDatatype = map[tensorflowpb.DataType]string{
	tensorflowpb.DataType_DT_FLOAT: "FP32", tensorflowpb.DataType_DT_DOUBLE: "FP64",
	tensorflowpb.DataType_DT_HALF: "FP16", tensorflowpb.DataType_DT_INT32: "INT32",
	tensorflowpb.DataType_DT_INT64: "INT64", tensorflowpb.DataType_DT_INT8: "INT8",
	tensorflowpb.DataType_DT_UINT8: "UINT8", tensorflowpb.DataType_DT_INT16: "INT16",
}

func appendAll[A, B, C, D, E, F float32 | float64 | int32 | int64 | uint32 | uint64](v []float64, a []A, b []B, c []C, d []D, e []E, f []F) []float64 {
	for _, x := range a {
		v = append(v, float64(x))
	}
	for _, x := range b {
		v = append(v, float64(x))
	}
	for _, x := range c {
		v = append(v, float64(x))
	}
	for _, x := range d {
		v = append(v, float64(x))
	}
	for _, x := range e {
		v = append(v, float64(x))
	}
	for _, x := range f {
		v = append(v, float64(x))
	}
	return v
}

// rawSize is the bytes of an element of a KServe datatype (1 for the
// others).
var rawSize = map[string]int{"FP64": 8, "INT64": 8, "UINT64": 8, "FP32": 4, "INT32": 4, "UINT32": 4,
	"FP16": 2, "BF16": 2, "INT16": 2, "UINT16": 2}

// rawValues decodes little-endian raw tensor bytes of a KServe datatype;
// an unknown datatype (BYTES) is compared byte by byte.
func rawValues(dt string, b []byte) []float64 {
	le := binary.LittleEndian
	size := rawSize[dt]
	if size == 0 {
		size = 1
	}
	v := make([]float64, 0, len(b)/size)
	for ; len(b) >= size; b = b[size:] {
		var x float64
		switch dt {
		case "FP64":
			x = math.Float64frombits(le.Uint64(b))
		case "INT64":
			x = float64(int64(le.Uint64(b)))
		case "UINT64":
			x = float64(le.Uint64(b))
		case "FP32":
			x = float64(math.Float32frombits(le.Uint32(b)))
		case "INT32":
			x = float64(int32(le.Uint32(b)))
		case "UINT32":
			x = float64(le.Uint32(b))
		case "FP16":
			x = halfFloat(le.Uint16(b))
		case "BF16":
			x = float64(math.Float32frombits(uint32(le.Uint16(b)) << 16))
		case "INT16":
			x = float64(int16(le.Uint16(b)))
		case "UINT16":
			x = float64(le.Uint16(b))
		case "INT8":
			x = float64(int8(b[0]))
		default:
			x = float64(b[0])
		}
		v = append(v, x)
	}
	return v
}

// halfFloat is an IEEE 754 half-precision value.
func halfFloat(h uint16) float64 {
	sign, exp, frac := float64(1), int(h>>10)&0x1f, float64(h&0x3ff)
	if h&0x8000 != 0 {
		sign = -1
	}
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}
