package notify

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind (sender
// workers, SMTP sessions, HTTP connections).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
