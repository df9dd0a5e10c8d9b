package streammeter

import (
	"testing"

	"github.com/infergate/infergate/internal/layers"
)

// The meter knows nothing of the proxy: it is handed the scans of a
// stream's requests and responses (proto/wire) and records into the
// monitor's types. The proxy imports it, never the reverse.
func TestLayersImportOneWay(t *testing.T) {
	layers.ImportsOnly(t, ".", "monitor", "proto/wire")
}
