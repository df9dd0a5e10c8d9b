package flowstats

import (
	"testing"

	"github.com/infergate/infergate/internal/layers"
)

// Flow control's accounting knows nothing of the proxy: it is handed each
// call's outcome at its gate and the gates to show, and reads flow's gates
// and the pool's endpoints (their limits, their recent latency). The
// proxy imports it, never the reverse.
func TestLayersImportOneWay(t *testing.T) {
	layers.ImportsOnly(t, ".", "flow", "proxy/pool")
}
