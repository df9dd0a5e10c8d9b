package route

import (
	"go/build"
	"strings"
	"testing"
)

// The router decides where a model's calls go and hears their verdicts;
// it never sends one. It imports nothing of the proxy or the relay: it
// reads the monitor's statistics, the pool's endpoints (for their status
// and metrics), and grpcwire's rule of which headers a client may send
// (an affinity header in a routing file); the proxy imports it, never the
// reverse.
func TestLayersImportOneWay(t *testing.T) {
	const module = "github.com/infergate/infergate/"
	allowed := map[string]bool{"monitor": true, "proxy/pool": true, "grpcwire": true}
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
