package flowstats

import (
	"go/build"
	"strings"
	"testing"
)

// Flow control's accounting knows nothing of the proxy: it is handed each
// call's outcome at its gate and the gates to show, and reads flow's gates
// and the pool's endpoints (their limits, their recent latency). The
// proxy imports it, never the reverse.
func TestLayersImportOneWay(t *testing.T) {
	const module = "github.com/infergate/infergate/"
	allowed := map[string]bool{"flow": true, "proxy/pool": true}
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
