package spans

import (
	"testing"

	"github.com/infergate/infergate/internal/layers"
)

// The spans know nothing of the proxy: they are handed a call's method,
// upstream, code and what was recorded of it, and read the batcher's
// batch (its id, rows, callers and link), the monitor's call features and
// the method table. The proxy imports them, never the reverse.
func TestLayersImportOneWay(t *testing.T) {
	layers.ImportsOnly(t, ".", "batcher", "monitor", "proto/methods")
}
