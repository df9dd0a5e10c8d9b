package tracing

import (
	"testing"

	"go.uber.org/goleak"
)

// The exporter and the batch processor run goroutines; Shutdown must end
// them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
