package proxy

import (
	"strings"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/wire"
)

// What a call carried: its bytes, rows and inputs, read by
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

// scanFeatures reads what an inference request carried into o: msg is
// the message, or its first bytes when size is larger (the call then has
// Partial features). keep says to make strings of the inputs now. wf,
// when not nil, is where the scan is kept, in the call's own heap object,
// so that a recorder that keeps the call (the slow-call keeper) makes the
// strings later (o.Lazy) and the calls it turns away never pay for them.
func scanFeatures(kind wire.TargetKind, msg []byte, size int64, keep bool, o *monitor.CallFeatures, wf *wire.Features) {
	if kind == 0 {
		return
	}
	var local wire.Features
	f := &local
	if wf != nil {
		f = wf
	}
	if wire.ScanFeatures(kind, msg, size, f) != nil {
		// The upstream, not the proxy, judges the bytes; what was read
		// before them stands.
		f.Partial = true
	}
	o.Rows, o.NumInputs, o.Partial = f.Rows, f.Inputs, f.Partial
	o.ShapeKey = shapeKey(f)
	if keep {
		o.Inputs = inputShapes(f)
	} else if wf != nil && f.Inputs > 0 {
		o.Lazy = (*lazyInputs)(wf)
	}
}

// lazyInputs gives a kept scan's inputs as monitor.InputShapes on demand.
// A pointer conversion: passing it as a monitor.InputSource allocates
// nothing.
type lazyInputs wire.Features

func (l *lazyInputs) CallInputs() []monitor.InputShape { return inputShapes((*wire.Features)(l)) }

// shapeKey hashes the kept inputs' names, datatypes and shapes (FNV-1a),
// so that calls of one shape count together without a string; 0 when
// there are none.
func shapeKey(f *wire.Features) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	kept := f.Kept()
	if len(kept) == 0 {
		return 0
	}
	mix := func(b byte) { h = (h ^ uint64(b)) * prime }
	for i := range kept {
		in := &kept[i]
		for _, b := range in.Name() {
			mix(b)
		}
		mix(0)
		for _, b := range in.Datatype() {
			mix(b)
		}
		mix(0)
		for _, d := range in.Dimensions() {
			for k := 0; k < 64; k += 8 {
				mix(byte(d >> k))
			}
		}
		mix(byte(in.Dims))
	}
	return max(h, 1)
}

// frameFeatures is scanFeatures for a request frame: a frame held in
// several buffers (a large request) is read from its first one, so its
// features are Partial when the inputs run past it.
func frameFeatures(kind wire.TargetKind, f *Frame, keep bool, o *monitor.CallFeatures, wf *wire.Features) {
	if kind == 0 || len(f.data) == 0 {
		return
	}
	scanFeatures(kind, f.data[0].ReadOnlyData(), int64(f.Len()), keep, o, wf)
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
