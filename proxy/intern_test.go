package proxy

import (
	"strconv"
	"strings"
	"testing"
)

func TestInternTable(t *testing.T) {
	var tab internTable
	if got := tab.get([]byte("resnet50")); got != "resnet50" {
		t.Fatalf("get = %q", got)
	}
	if got := tab.get(nil); got != "" {
		t.Fatalf("get(nil) = %q", got)
	}
	if !raceEnabled {
		b := []byte("resnet50")
		if n := testing.AllocsPerRun(100, func() { _ = tab.get(b) }); n != 0 {
			t.Errorf("a name seen before costs %v allocations, want 0", n)
		}
	}
	// Bounded: names past the cap, and long ones, are not kept.
	for i := range maxInterned + 10 {
		if got := tab.get([]byte("m" + strconv.Itoa(i))); got != "m"+strconv.Itoa(i) {
			t.Fatalf("get = %q", got)
		}
	}
	long := strings.Repeat("x", maxInternedLen+1)
	if got := tab.get([]byte(long)); got != long {
		t.Fatal("long name changed")
	}
	m := *tab.m.Load()
	if len(m) != maxInterned {
		t.Errorf("%d names kept, want the cap %d", len(m), maxInterned)
	}
	if _, ok := m[long]; ok {
		t.Error("a name over maxInternedLen was kept")
	}
}
