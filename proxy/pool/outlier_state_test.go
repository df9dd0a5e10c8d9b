package pool

import (
	"testing"
	"time"
)

// countJudged counts a window's calls and failures, and a new window
// starts from none.
func TestOutlierStateCountsByWindow(t *testing.T) {
	var o outlierState
	t0 := int64(1000 * time.Second)
	for i := range 10 {
		o.countJudged(t0+int64(i), i%2 == 0)
	}
	if calls, fails := o.countJudged(t0+10, false); calls != 11 || fails != 5 {
		t.Errorf("in one window: %d calls, %d failed, want 11 and 5", calls, fails)
	}
	next := t0 + int64(ratioWindow)
	if calls, fails := o.countJudged(next, true); calls != 1 || fails != 1 {
		t.Errorf("the next window: %d calls, %d failed, want 1 and 1", calls, fails)
	}
}
