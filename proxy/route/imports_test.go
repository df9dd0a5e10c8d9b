package route

import (
	"testing"

	"github.com/infergate/infergate/internal/layers"
)

// The router decides where a model's calls go and hears their verdicts;
// it never sends one. It imports nothing of the proxy or the relay: it
// reads the monitor's statistics, the pool's endpoints (for their status
// and metrics), and grpcwire's rule of which headers a client may send
// (an affinity header in a routing file); the proxy imports it, never the
// reverse.
func TestLayersImportOneWay(t *testing.T) {
	layers.ImportsOnly(t, ".", "monitor", "proxy/pool", "grpcwire")
}
