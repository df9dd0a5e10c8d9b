package batcher

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind
// (dispatchers, batch senders, waiting callers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
