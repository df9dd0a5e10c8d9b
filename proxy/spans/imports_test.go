package spans

import (
	"go/build"
	"strings"
	"testing"
)

// The spans know nothing of the proxy: they are handed a call's method,
// upstream, code and what was recorded of it, and read the batcher's
// batch (its id, rows, callers and link), the monitor's call features and
// the method table. The proxy imports them, never the reverse.
func TestLayersImportOneWay(t *testing.T) {
	const module = "github.com/infergate/infergate/"
	allowed := map[string]bool{"batcher": true, "monitor": true, "proto/methods": true}
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
