package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind: stream
// pumps, upstream calls, servers or connections.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
