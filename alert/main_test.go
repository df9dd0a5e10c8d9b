package alert

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind (the
// receivers' sender workers, the evaluation loop of Run).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
