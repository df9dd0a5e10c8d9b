package anomaly

import (
	"testing"

	"github.com/infergate/infergate/internal/layers"
)

// The detector imports nothing of infergate (DESIGN.md, "Releases and
// anomalies"): the alert engine feeds it deviations and turns its scores
// into a rule kind.
func TestLayersImportOneWay(t *testing.T) {
	layers.ImportsOnly(t, ".")
}
