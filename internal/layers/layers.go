// Package layers checks, from a package's tests, that the package imports
// of this module only what its layer may: the arrows between packages
// point one way (DESIGN.md).
package layers

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/infergate/infergate/"

// ImportsOnly fails t for every package of the module that the package in
// dir imports (its tests not counted) and allowed does not name; allowed
// are paths within the module ("proxy/pool").
func ImportsOnly(t testing.TB, dir string, allowed ...string) {
	t.Helper()
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if own, ok := strings.CutPrefix(imp, module); ok && !slices.Contains(allowed, own) {
			t.Errorf("%s imports %s", pkg.ImportPath, imp)
		}
	}
}
