package grow

import "testing"

// TestCapped: the capacity doubles from least and stops at limit exactly,
// and the elements are kept.
func TestCapped(t *testing.T) {
	var s []int
	var caps []int
	for i := range 300 {
		if len(s) == cap(s) {
			s = Capped(s, 8, 300)
			caps = append(caps, cap(s))
		}
		s = append(s, i)
	}
	want := []int{8, 16, 32, 64, 128, 256, 300}
	if len(caps) != len(want) {
		t.Fatalf("capacities %v, want %v", caps, want)
	}
	for i := range want {
		if caps[i] != want[i] {
			t.Fatalf("capacities %v, want %v", caps, want)
		}
	}
	for i, v := range s {
		if v != i {
			t.Fatalf("element %d is %d after growing", i, v)
		}
	}
}
