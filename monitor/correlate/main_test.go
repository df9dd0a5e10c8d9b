package correlate

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind
// (correlator loops).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
