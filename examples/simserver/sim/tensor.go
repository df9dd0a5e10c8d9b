package sim

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxElements bounds a tensor's element count so a hostile shape cannot
// overflow the size arithmetic; it is above what a 256 MiB message carries.
const maxElements = 1 << 28

// tensor is a decoded tensor, protocol-neutral: its shape and its data as
// flattened row-major little-endian bytes (the KServe raw layout).
type tensor struct {
	shape []int64
	raw   []byte
}

// elemSize is the byte size of one element of a supported datatype.
func elemSize(datatype string) int {
	switch datatype {
	case "FP32", "INT32":
		return 4
	}
	return 0
}

// checkShape validates an input shape against its spec and returns the
// batch size (1 when the model does not batch) and the element count.
func (m *model) checkShape(spec TensorSpec, shape []int64) (batch, elems int, err error) {
	cfg := &m.cfg
	want := spec.Dims
	if cfg.MaxBatch > 0 {
		want = append([]int64{-1}, spec.Dims...)
	}
	mismatch := func() error {
		expected := "any shape"
		if !spec.AnyShape {
			expected = formatShape(want)
		}
		return status.Errorf(codes.InvalidArgument,
			"unexpected shape for input '%s' for model '%s'. Expected %s, got %s",
			spec.Name, cfg.Name, expected, formatShape(shape))
	}
	if !spec.AnyShape && len(shape) != len(want) {
		return 0, 0, mismatch()
	}
	elems = 1
	for i, d := range shape {
		if d < 1 || (!spec.AnyShape && want[i] != -1 && want[i] != d) {
			return 0, 0, mismatch()
		}
		if int64(elems) > maxElements/d {
			return 0, 0, status.Errorf(codes.InvalidArgument,
				"input '%s' for model '%s' is too large: shape %s", spec.Name, cfg.Name, formatShape(shape))
		}
		elems *= int(d)
	}
	batch = 1
	if cfg.MaxBatch > 0 {
		batch = int(shape[0])
		if batch > cfg.MaxBatch {
			return 0, 0, status.Errorf(codes.InvalidArgument,
				"inference request batch-size must be <= %d for '%s'", cfg.MaxBatch, cfg.Name)
		}
	}
	return batch, elems, nil
}

// formatShape writes a shape as Triton does in messages: [1,16].
func formatShape(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// checkRawSize validates the byte length of raw data for an input.
func (m *model) checkRawSize(spec TensorSpec, elems, got int) error {
	if want := elems * elemSize(spec.Datatype); got != want {
		return status.Errorf(codes.InvalidArgument,
			"unexpected total byte size %d for input '%s', expecting %d", got, spec.Name, want)
	}
	return nil
}

// checkCount validates the number of typed elements for an input.
func (m *model) checkCount(spec TensorSpec, elems, got int) error {
	if got != elems {
		return status.Errorf(codes.InvalidArgument,
			"unexpected number of elements %d in contents for input '%s', expecting %d", got, spec.Name, elems)
	}
	return nil
}

func float32sToRaw(v []float32) []byte {
	raw := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return raw
}

func int32sToRaw(v []int32) []byte {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
	}
	return raw
}

func rawToFloat32s(raw []byte) []float32 {
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

func rawToInt32s(raw []byte) []int32 {
	v := make([]int32, len(raw)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

// broadcast repeats a single element n times (TF-Serving's rule for a
// one-element *_val field).
func broadcast[T any](v []T, n int) []T {
	if len(v) != 1 || n == 1 {
		return v
	}
	out := make([]T, n)
	for i := range out {
		out[i] = v[0]
	}
	return out
}

// errUnknownInput is the Triton-style error for an input the model lacks.
func (m *model) errUnknownInput(name string) error {
	return status.Errorf(codes.InvalidArgument, "unexpected inference input '%s' for model '%s'", name, m.cfg.Name)
}

// errMissing is the Triton-style error for missing inputs.
func (m *model) errMissing(got int, missing []string) error {
	return status.Errorf(codes.InvalidArgument,
		"expected %d inputs but got %d inputs for model '%s'. Missing required input(s) %s",
		len(m.cfg.Inputs), got, m.cfg.Name, quoteList(missing))
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}
