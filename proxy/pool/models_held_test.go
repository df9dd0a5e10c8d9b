package pool

import (
	"fmt"
	"testing"
	"time"
)

// An endpoint that cannot say holds every model; one that listed its
// models holds those; a NOT_FOUND leaves a model out for absentFor, even
// one its list said ready, and the list it sends next keeps the absence;
// a flood of made-up names is bounded.
func TestModelsHeld(t *testing.T) {
	var m modelsHeld
	t0 := int64(1000 * time.Second)
	if !m.holds("any", t0) || !m.holds("", t0) {
		t.Fatal("an endpoint not asked yet must hold every model")
	}
	m.setReady(map[string]bool{"resnet50": true})
	if !m.holds("resnet50", t0) || m.holds("bert", t0) {
		t.Errorf("listed resnet50: holds resnet50 %v, bert %v", m.holds("resnet50", t0), m.holds("bert", t0))
	}
	m.markAbsent("resnet50", t0)
	if m.holds("resnet50", t0+1) {
		t.Error("a NOT_FOUND for a listed model: still held")
	}
	m.setReady(map[string]bool{"resnet50": true})
	if m.holds("resnet50", t0+1) {
		t.Error("a new list forgot the absence before it expired")
	}
	if !m.holds("resnet50", t0+int64(absentFor)+1) {
		t.Error("the absence did not expire")
	}
	for i := range 2 * maxAbsent {
		m.markAbsent(fmt.Sprintf("made-up-%d", i), t0)
	}
	if n := len(m.models.Load().absent); n > maxAbsent+1 {
		t.Errorf("%d absences kept, want at most %d", n, maxAbsent+1)
	}
}
