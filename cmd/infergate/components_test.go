package main

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// Components start in the order added and stop in reverse; a start that
// fails stops those started before it, and not the ones after.
func TestComponentsStartInOrderStopInReverse(t *testing.T) {
	var got []string
	rec := func(s string) func() { return func() { got = append(got, s) } }
	var cs components
	cs.add("parts", nil, rec("stop parts"))
	cs.loop("loop", func(ctx context.Context) { <-ctx.Done(); got = append(got, "loop ended") })
	cs.add("listener", func() error { got = append(got, "start listener"); return nil }, rec("stop listener"))
	if err := cs.startAll(); err != nil {
		t.Fatal(err)
	}
	cs.stopAll()
	cs.stopAll() // again: nothing
	want := []string{"start listener", "stop listener", "loop ended", "stop parts"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	got = nil
	cs = components{}
	cs.add("a", func() error { got = append(got, "start a"); return nil }, rec("stop a"))
	cs.add("b", func() error { return errors.New("no port") }, rec("stop b"))
	cs.add("c", func() error { got = append(got, "start c"); return nil }, rec("stop c"))
	err := cs.startAll()
	if err == nil || err.Error() != "b: no port" {
		t.Errorf("startAll = %v, want the failing one named", err)
	}
	if want := []string{"start a", "stop a"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
