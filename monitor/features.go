package monitor

import (
	"strconv"
	"strings"
)

// CallFeatures is what one call carried, as the proxy read it from the
// request's bytes (never the tensor values): the payload sizes, the rows
// (the batch dimension) and the inputs' names, datatypes and shapes. It is
// the type a record of a call (a span, a slow-call record) keeps of its
// request.
type CallFeatures struct {
	BytesIn  int64 // request payload bytes, as Sample.BytesIn
	BytesOut int64 // response payload bytes, as Sample.BytesOut
	// Rows is the first dimension of the first input: the batch size of a
	// model that batches. 0 when unknown (no input with a shape, or not an
	// inference call).
	Rows int64
	// Inputs are the request's inputs, at most 8 (NumInputs counts them
	// all); nil unless the proxy was asked to keep them (they cost a few
	// allocations per call), or when the call is not an inference call.
	Inputs    []InputShape
	NumInputs int
	// Partial says the inputs were read from the request's first bytes
	// only (a large request relayed as it arrived): inputs after them may
	// be missing, the last one's shape cut.
	Partial bool
	// ShapeKey identifies the inputs' names, datatypes and shapes (a
	// hash the proxy makes from its scan without allocating): calls with
	// equal keys had equal inputs. 0 when unknown. The slow-call keeper
	// counts shapes by it.
	ShapeKey uint64
	// Lazy gives the inputs on demand when Inputs is nil, so that only
	// the calls a recorder keeps pay for their strings. It is valid only
	// until Record returns: a recorder calls it then or never.
	Lazy InputSource
}

// InputSource gives a call's inputs on demand (CallFeatures.Lazy).
type InputSource interface {
	CallInputs() []InputShape
}

// InputShape is one input tensor of a request.
type InputShape struct {
	Name     string
	Datatype string  // as the protocol names it: "FP32" (KServe), "DT_FLOAT" (TF-Serving)
	Shape    []int64 // at most 8 dimensions; Dims counts them all
	Dims     int
}

// String formats the input as "INPUT0:FP32[8,3,224,224]", with ",..." for
// dimensions past those kept.
func (s InputShape) String() string {
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte(':')
	b.WriteString(s.Datatype)
	b.WriteByte('[')
	for i, d := range s.Shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	if s.Dims > len(s.Shape) {
		b.WriteString(",...")
	}
	b.WriteByte(']')
	return b.String()
}

// Size classes of a call's request bytes: SeriesKey.SizeClass, the
// size_class label of the latency metrics, so that "p99 by input size" is
// one PromQL query. Five classes, each 16 times the last: a few tensors
// of scalars or token ids (up to 4 KiB), a small image or a batch of
// embeddings (64 KiB), one 224×224×3 FP32 image (588 KiB, up to 1 MiB), a
// batch of them (16 MiB), and more. Bounds are inclusive (le_ as in
// Prometheus buckets). Five keeps the label's cardinality low: a model's
// series multiply by at most 5, and by one or two in practice, since a
// model's requests mostly fall in one class.
const (
	SizeClass4KiB  = "le_4KiB"
	SizeClass64KiB = "le_64KiB"
	SizeClass1MiB  = "le_1MiB"
	SizeClass16MiB = "le_16MiB"
	SizeClassOver  = "gt_16MiB"
)

// SizeClasses lists the size classes, smallest first.
var SizeClasses = []string{SizeClass4KiB, SizeClass64KiB, SizeClass1MiB, SizeClass16MiB, SizeClassOver}

// SizeClassOf returns the size class of a request of n bytes.
func SizeClassOf(n int64) string {
	switch {
	case n <= 4<<10:
		return SizeClass4KiB
	case n <= 64<<10:
		return SizeClass64KiB
	case n <= 1<<20:
		return SizeClass1MiB
	case n <= 16<<20:
		return SizeClass16MiB
	}
	return SizeClassOver
}
