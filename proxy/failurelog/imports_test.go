package failurelog

import (
	"testing"

	"github.com/infergate/infergate/internal/layers"
)

// The failure log knows nothing of the proxy: it counts and writes lines
// about the failures the proxy notes. The proxy imports it, never the
// reverse.
func TestLayersImportOneWay(t *testing.T) {
	layers.ImportsOnly(t, ".")
}
