package release

import "math"

// How a shadow's answers are compared (Shadow.Compare).
const (
	// CompareValues compares every output value: the largest absolute and
	// relative difference, against the tolerance.
	CompareValues = "values"
	// CompareTop1 compares a classifier's top class per row.
	CompareTop1 = "top1"
)

// Tolerance is how far two output values may be apart and still agree:
// |a-b| <= Abs, or |a-b| <= Rel·max(|a|,|b|). Both zero means equal.
type Tolerance struct {
	Abs float64 `yaml:"abs" json:"abs"`
	Rel float64 `yaml:"rel" json:"rel"`
}

// Float is the element type of the tensors compared.
type Float interface{ ~float32 | ~float64 }

// Diff is how far apart two tensors are.
type Diff struct {
	// MaxAbs is the largest |a-b|; MaxRel the largest |a-b|/max(|a|,|b|)
	// (0 where both are 0).
	MaxAbs, MaxRel float64
	// Apart counts the values outside the tolerance. A NaN on one side
	// only, a different length or different infinities are apart.
	Apart int
}

// Agree reports whether every value was within the tolerance.
func (d Diff) Agree() bool { return d.Apart == 0 }

// CompareTensors compares the stable answer a with the shadow's b, value
// by value, against tol. Tensors of different lengths disagree
// (Apart counts the missing values).
func CompareTensors[F Float](a, b []F, tol Tolerance) Diff {
	var d Diff
	n := min(len(a), len(b))
	d.Apart = max(len(a), len(b)) - n
	for i := range n {
		x, y := float64(a[i]), float64(b[i])
		if x == y || (math.IsNaN(x) && math.IsNaN(y)) {
			continue
		}
		diff := math.Abs(x - y)
		if math.IsNaN(diff) || math.IsInf(diff, 0) {
			d.Apart++
			d.MaxAbs, d.MaxRel = math.Inf(1), math.Inf(1)
			continue
		}
		rel := diff / max(math.Abs(x), math.Abs(y))
		d.MaxAbs = max(d.MaxAbs, diff)
		d.MaxRel = max(d.MaxRel, rel)
		if diff > tol.Abs && rel > tol.Rel {
			d.Apart++
		}
	}
	return d
}

// Top1 compares a classifier's answers: a and b hold rows×classes scores
// (row-major); it returns the rows whose highest-scoring class is the
// same, and the rows compared. A shape that does not divide into rows of
// classes compares nothing: (0, rows of the longer).
func Top1[F Float](a, b []F, classes int) (agree, rows int) {
	if classes < 1 {
		return 0, 0
	}
	if len(a) != len(b) || len(a)%classes != 0 {
		return 0, max(len(a), len(b)) / classes
	}
	rows = len(a) / classes
	for r := range rows {
		if argmax(a[r*classes:(r+1)*classes]) == argmax(b[r*classes:(r+1)*classes]) {
			agree++
		}
	}
	return agree, rows
}

// argmax returns the first index of the largest value (NaN never wins).
func argmax[F Float](v []F) int {
	best := 0
	for i := 1; i < len(v); i++ {
		if v[i] > v[best] || v[best] != v[best] {
			best = i
		}
	}
	return best
}
