package proxy

import (
	"errors"

	"github.com/infergate/infergate/proto/wire"
)

// TEMPORARY until the wire helpers land.
func init() { _ = wire.ErrMalformed }

var errShim = errors.New("shim")

func wirePredictConfidence([]byte, string) (float64, error)    { return 0, errShim }
func wireModelInferConfidence([]byte, string) (float64, error) { return 0, errShim }
