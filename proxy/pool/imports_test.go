package pool

import (
	"testing"

	"github.com/infergate/infergate/internal/layers"
)

// The pool sees picks and verdicts, never a call: it imports nothing of
// the proxy, the relay or the monitor, only flow control's limiter and
// what it reads of a request (a sequence, the method table) and of a
// replica (its model list).
func TestLayersImportOneWay(t *testing.T) {
	layers.ImportsOnly(t, ".", "flow", "proto/methods", "proto/wire", "proto/kservepb")
}
