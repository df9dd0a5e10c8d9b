package proxy

import (
	"strings"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/wire"
)

// What a call carried (issue 29): its bytes, rows and inputs, read by
// wire.ScanFeatures from the request bytes the proxy holds anyway, never
// by decoding a tensor. The figures (rows, input count) are read for every
// inference call into a wire.Features on the stack, which costs no
// allocation; the inputs' names, datatypes and shapes become strings only
// for a call that is traced, or when WithInputShapes asks for them on
// every call (three allocations per inference call).

// WithInputShapes makes the proxy fill Sample.Features.Inputs of every
// inference call it records (ModelInfer, Predict): the inputs' names,
// datatypes and shapes, for a recorder that keeps calls (slow-call
// records). It costs three allocations per such call, which is why it is
// off by default; traced calls get them on their spans either way.
func WithInputShapes(on bool) Option {
	return optionFunc(func(o *options) { o.inputShapes = on })
}

// featureKind is the layout of method's request that ScanFeatures reads:
// only ModelInfer and Predict carry input tensors; 0 for every other
// method.
func featureKind(method string) wire.TargetKind {
	switch method {
	case kservePrefix + "ModelInfer":
		return wire.KServeTarget
	case tfPrefix + "Predict":
		return wire.TFServingTarget
	}
	return 0
}

// scanFeatures reads what an inference request carried into o.feat: msg
// is the message, or its first bytes when size is larger (the call then
// has Partial features). keep says to make strings of the inputs.
func scanFeatures(kind wire.TargetKind, msg []byte, size int64, keep bool, o *monitor.CallFeatures) {
	if kind == 0 {
		return
	}
	var f wire.Features
	if wire.ScanFeatures(kind, msg, size, &f) != nil {
		// The upstream, not the proxy, judges the bytes; what was read
		// before them stands.
		f.Partial = true
	}
	o.Rows, o.NumInputs, o.Partial = f.Rows, f.Inputs, f.Partial
	if keep {
		o.Inputs = inputShapes(&f)
	}
}

// frameFeatures is scanFeatures for a request frame: a frame held in
// several buffers (a large request) is read from its first one, so its
// features are Partial when the inputs run past it.
func frameFeatures(kind wire.TargetKind, f *Frame, keep bool, o *monitor.CallFeatures) {
	if kind == 0 || len(f.data) == 0 {
		return
	}
	scanFeatures(kind, f.data[0].ReadOnlyData(), int64(f.Len()), keep, o)
}

// inputShapes makes f's kept inputs into monitor.InputShapes in three
// allocations: the slice, one string holding every name and datatype,
// and one array holding every shape.
func inputShapes(f *wire.Features) []monitor.InputShape {
	kept := f.Kept()
	if len(kept) == 0 {
		return nil
	}
	var n, dims int
	for i := range kept {
		n += len(kept[i].Name()) + len(kept[i].Datatype())
		dims += len(kept[i].Dimensions())
	}
	var b strings.Builder
	b.Grow(n)
	for i := range kept {
		b.Write(kept[i].Name())
		b.Write(kept[i].Datatype())
	}
	all := b.String()
	shapes := make([]int64, 0, dims)
	out := make([]monitor.InputShape, len(kept))
	for i := range kept {
		in := &kept[i]
		name, dt := len(in.Name()), len(in.Datatype())
		start := len(shapes)
		shapes = append(shapes, in.Dimensions()...)
		out[i] = monitor.InputShape{Name: all[:name], Datatype: all[name : name+dt],
			Shape: shapes[start:len(shapes):len(shapes)], Dims: in.Dims}
		all = all[name+dt:]
	}
	return out
}
