package batcher

import (
	"github.com/infergate/infergate/batcher/merge"
)

// WithCodec sets the codec that parses, merges and splits requests of
// method, in place of merge.KServe for methods.ModelInfer and merge.TF for
// methods.Predict: tests substitute their own.
func WithCodec(method string, c merge.Codec) Option {
	return optionFunc(func(b *Batcher) { b.codecs[method] = c })
}
