package pool

import (
	"go/build"
	"strings"
	"testing"
)

// The pool sees picks and verdicts, never a call: it imports nothing of
// the proxy, the relay or the monitor, only flow control's limiter and
// what it reads of a request (a sequence, the method table) and of a
// replica (its model list).
func TestLayersImportOneWay(t *testing.T) {
	const module = "github.com/infergate/infergate/"
	allowed := map[string]bool{"flow": true, "proto/methods": true, "proto/wire": true, "proto/kservepb": true}
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if own, ok := strings.CutPrefix(imp, module); ok && !allowed[own] {
			t.Errorf("%s imports %s", pkg.ImportPath, imp)
		}
	}
}
