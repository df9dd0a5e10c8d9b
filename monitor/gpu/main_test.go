package gpu

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind
// (samplers, scrape servers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
