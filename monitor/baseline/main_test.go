package baseline

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind
// (warm-up servers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
