package route

import (
	"go/build"
	"strings"
	"testing"
)

// The route's primitives see verdicts, never a call: they import nothing
// of the module (the proxy feeds them).
func TestLayersImportOneWay(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/infergate/infergate/") {
			t.Errorf("%s imports %s", pkg.ImportPath, imp)
		}
	}
}
