package proxy

import "testing"

func TestDirtyPoolSizes(t *testing.T) {
	p := newDirtyPool()
	for _, n := range []int{0, 1, 255, 256, 257, 16 << 10, 1<<20 + 1, 16 << 20, 16<<20 + 1} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d) has length %d", n, len(*b))
		}
		p.Put(b)
		again := p.Get(n)
		if len(*again) != n {
			t.Fatalf("Get(%d) after Put has length %d", n, len(*again))
		}
	}
	odd := make([]byte, 300) // not a tier size: dropped, never handed out short
	p.Put(&odd)
	if b := p.Get(500); len(*b) != 500 || cap(*b) < 500 {
		t.Fatalf("Get(500) = len %d cap %d", len(*b), cap(*b))
	}
}
