package failurelog

import (
	"go/build"
	"strings"
	"testing"
)

// The failure log knows nothing of the proxy: it counts and writes lines
// about the failures the proxy notes. The proxy imports it, never the
// reverse.
func TestLayersImportOneWay(t *testing.T) {
	const module = "github.com/infergate/infergate/"
	allowed := map[string]bool{}
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
