package prefix

import "testing"

func TestReadWhatPutWrote(t *testing.T) {
	for _, n := range []int{0, 1, 255, 1 << 20, 1<<32 - 1} {
		b := make([]byte, Len)
		Put(b, n)
		flag, got, ok := Read(b)
		if !ok || flag != 0 || got != uint32(n) {
			t.Errorf("%d: read %d %d %v", n, flag, got, ok)
		}
	}
	if _, _, ok := Read([]byte{0, 0, 0, 1}); ok {
		t.Error("a 4-byte prefix read as whole")
	}
	if flag, n, _ := Read([]byte{1, 0, 0, 1, 0}); flag != 1 || n != 256 {
		t.Errorf("compressed: %d %d", flag, n)
	}
}
