package h2relay

import (
	"testing"

	"github.com/infergate/infergate/internal/layers"
)

// The relay's layers import in one direction: the codec knows nothing of
// the module (HTTP/2 only), and the relay nothing of the proxy or of any
// message format (it scans through the Handler's Scanner).
func TestLayersImportOneWay(t *testing.T) {
	layers.ImportsOnly(t, "h2codec")
	layers.ImportsOnly(t, ".", "budget", "grpcwire", "proxy/h2relay/h2codec")
}
