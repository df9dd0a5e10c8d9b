package h2relay

import (
	"go/build"
	"strings"
	"testing"
)

// The relay's layers import in one direction: the codec knows nothing of
// the module (HTTP/2 only), and the relay nothing of the proxy or of any
// message format (it scans through the Handler's Scanner).
func TestLayersImportOneWay(t *testing.T) {
	const module = "github.com/infergate/infergate/"
	for dir, allowed := range map[string][]string{
		"h2codec": nil,
		".":       {"budget", "grpcwire", "proxy/h2relay/h2codec"},
	} {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
	next:
		for _, imp := range pkg.Imports {
			own, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			for _, a := range allowed {
				if own == a {
					continue next
				}
			}
			t.Errorf("%s imports %s", pkg.ImportPath, imp)
		}
	}
}
