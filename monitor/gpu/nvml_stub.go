//go:build !cgo || nonvml

package gpu

// stubNVML is the NVML of a build without cgo: Init fails, so the source
// goes off and nothing else is ever called.
type stubNVML struct{}

func newNVMLLib() nvmlLib { return stubNVML{} }

func (stubNVML) Init() error                    { return ErrNVMLNotCompiled }
func (stubNVML) Shutdown() error                { return ErrNVMLNotCompiled }
func (stubNVML) Count() (int, error)            { return 0, ErrNVMLNotCompiled }
func (stubNVML) Device(int) (nvmlDevice, error) { return nil, ErrNVMLNotCompiled }
