package merge

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// Sentinel errors for errors.Is; every error a Codec returns from a request
// or response problem wraps exactly one of them.
var (
	// ErrInvalid marks a malformed request: the batcher does not batch it,
	// and its caller sends it alone for the model server to judge.
	ErrInvalid = errors.New("invalid request")
	// ErrUnbatchable marks a valid request that must go upstream on its own.
	ErrUnbatchable = errors.New("request cannot be batched")
	// ErrSplit marks an upstream response that cannot be cut by rows.
	ErrSplit = errors.New("response cannot be split")
)

// Item is one caller's parsed, batchable request.
type Item struct {
	// Rows is the size of dimension 0 (the batch dimension), the same for
	// every input; always at least 1.
	Rows int
	// Key is the compatibility key: requests with equal keys (same model
	// and version, input names, datatypes, shapes without dimension 0,
	// raw or typed representation, requested outputs and their parameters,
	// request parameters) may be merged. It is an opaque binary string.
	Key string

	kreq *kservepb.ModelInferRequest // set by KServe.Parse
	treq *tfservingpb.PredictRequest // set by TF.Parse
	// tnames lists treq's input names sorted, so merging walks the map in a
	// fixed order.
	tnames []string
}

// Codec merges compatible requests of one protocol into one and splits the
// response. Implementations are stateless and safe for concurrent use.
type Codec interface {
	// Parse decodes and validates one request. An invalid request returns an
	// error wrapping ErrInvalid; a valid request that cannot be batched
	// returns an error wrapping ErrUnbatchable (see the package doc for the
	// cases).
	Parse(req []byte) (*Item, error)
	// Merge builds one upstream request from compatible items (same Key),
	// concatenating every input along dimension 0 in items order. The
	// merged request's id is empty (KServe) and its model, version and
	// parameters come from the first item.
	Merge(items []*Item) ([]byte, error)
	// Split cuts the upstream response into one response per item, by each
	// item's Rows, in items order; each gets its own id (KServe) and shapes.
	// A response that does not fit the items returns an error wrapping
	// ErrSplit.
	Split(resp []byte, items []*Item) ([][]byte, error)
}

// KServe is the Codec for inference.ModelInferRequest / ModelInferResponse.
var KServe Codec = kserveCodec{}

// TF is the Codec for tensorflow.serving.PredictRequest / PredictResponse.
var TF Codec = tfCodec{}

// marshalOpts is deterministic so that TF maps (and parameter maps) encode
// the same way every time: equal batches give equal bytes.
var marshalOpts = proto.MarshalOptions{Deterministic: true}

// checkItems verifies the batcher's side of the contract (non-empty, one
// protocol, one key) and returns the total row count. A violation is a
// programming error, not a request error, so it wraps no sentinel.
func checkItems(proto string, items []*Item, kserve bool) (int, error) {
	if len(items) == 0 {
		return 0, fmt.Errorf("merge: %s: no items", proto)
	}
	total := 0
	for i, it := range items {
		if it == nil || (kserve && it.kreq == nil) || (!kserve && it.treq == nil) {
			return 0, fmt.Errorf("merge: %s: item %d was not parsed by this codec", proto, i)
		}
		if it.Key != items[0].Key {
			return 0, fmt.Errorf("merge: %s: item %d has a different key from item 0", proto, i)
		}
		total += it.Rows
	}
	return total, nil
}
