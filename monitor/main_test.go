package monitor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind
// (registry rotators, concurrent recorders).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
