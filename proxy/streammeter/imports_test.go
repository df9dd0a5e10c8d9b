package streammeter

import (
	"go/build"
	"strings"
	"testing"
)

// The meter knows nothing of the proxy: it is handed the scans of a
// stream's requests and responses (proto/wire) and records into the
// monitor's types. The proxy imports it, never the reverse.
func TestLayersImportOneWay(t *testing.T) {
	const module = "github.com/infergate/infergate/"
	allowed := map[string]bool{"monitor": true, "proto/wire": true}
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
