package release

import (
	"math"
	"testing"
)

func TestCompareTensors(t *testing.T) {
	tol := Tolerance{Abs: 1e-3, Rel: 1e-2}
	cases := []struct {
		name   string
		a, b   []float64
		agree  bool
		apart  int
		maxAbs float64
	}{
		{"equal", []float64{1, 2, 3}, []float64{1, 2, 3}, true, 0, 0},
		{"within rel", []float64{100, 2}, []float64{100.5, 2}, true, 0, 0.5},
		{"within abs", []float64{0, 1e-4}, []float64{5e-4, 1e-4}, true, 0, 5e-4},
		{"apart", []float64{1, 2}, []float64{1.5, 2}, false, 1, 0.5},
		{"NaN on one side", []float64{math.NaN(), 1}, []float64{0, 1}, false, 1, math.Inf(1)},
		{"NaN on both", []float64{math.NaN()}, []float64{math.NaN()}, true, 0, 0},
		{"lengths", []float64{1, 2, 3}, []float64{1}, false, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := CompareTensors(tc.a, tc.b, tol)
			if d.Agree() != tc.agree || d.Apart != tc.apart || math.Abs(d.MaxAbs-tc.maxAbs) > 1e-12 && d.MaxAbs != tc.maxAbs {
				t.Errorf("got %+v, want agree %v apart %d max abs %g", d, tc.agree, tc.apart, tc.maxAbs)
			}
		})
	}
	if d := CompareTensors([]float32{1, 2}, []float32{1, 2.5}, Tolerance{}); d.MaxRel != 0.2 || d.Apart != 1 {
		t.Errorf("float32: %+v", d)
	}
}

func TestTop1(t *testing.T) {
	a := []float32{0.1, 0.7, 0.2 /* row 2 */, 0.5, 0.4, 0.1 /* row 3 */, 0.3, 0.3, 0.4}
	b := []float32{0.2, 0.6, 0.2 /* row 2 */, 0.4, 0.5, 0.1 /* row 3 */, 0.1, 0.2, 0.7}
	if agree, rows := Top1(a, b, 3); agree != 2 || rows != 3 {
		t.Errorf("Top1 = %d of %d, want 2 of 3", agree, rows)
	}
	if agree, rows := Top1(a, b[:6], 3); agree != 0 || rows != 3 {
		t.Errorf("mismatched shapes = %d of %d, want 0 of 3", agree, rows)
	}
}
