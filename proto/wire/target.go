package wire

import (
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers shared by the request messages this package reads.
const (
	// kserveName and kserveVersion are model_name/model_version in
	// ModelInferRequest and name/version in the other KServe v2 requests.
	kserveName    protowire.Number = 1
	kserveVersion protowire.Number = 2

	// tfModelSpec is model_spec in PredictRequest, GetModelMetadataRequest,
	// ClassificationRequest and RegressionRequest.
	tfModelSpec protowire.Number = 1

	// Fields of tensorflow.serving.ModelSpec.
	specName         protowire.Number = 1
	specVersion      protowire.Number = 2 // google.protobuf.Int64Value
	specVersionLabel protowire.Number = 4

	// int64ValueValue is the value field of google.protobuf.Int64Value.
	int64ValueValue protowire.Number = 1
)

// ErrMalformed is wrapped by every error returned for bytes that are not a
// valid protobuf message.
var ErrMalformed = errors.New("malformed protobuf")

// malformed builds the error for a negative protowire length n met while
// reading what.
func malformed(what string, n int) error {
	return malformedErr(what, protowire.ParseError(n))
}

// malformedErr wraps the parse error err met while reading what.
func malformedErr(what string, err error) error {
	return fmt.Errorf("wire: %s: %w: %w", what, ErrMalformed, err)
}

// ModelInferTarget returns the model name and version of a serialized KServe
// v2 ModelInferRequest (fields 1 and 2) without unmarshalling it. Every other
// field, the raw tensor contents included, is skipped by its length. The last
// occurrence of a field wins, as in proto3. It serves the same way for
// ModelMetadataRequest, ModelReadyRequest, ModelConfigRequest and
// ModelStatisticsRequest, whose name and version are fields 1 and 2 too.
// Missing fields give "". Malformed bytes give an error wrapping ErrMalformed.
func ModelInferTarget(b []byte) (model, version string, err error) {
	name, ver, err := ModelInferTargetBytes(b)
	return string(name), string(ver), err
}

// ModelInferTargetBytes is ModelInferTarget with the name and version as
// slices of b (nil when missing), for a caller that keeps strings of its
// own (the proxy interns the names it has seen rather than allocating
// them per call).
func ModelInferTargetBytes(b []byte) (model, version []byte, err error) {
	var name, ver []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, malformed("ModelInferRequest tag", n)
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == kserveName || num == kserveVersion) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, nil, malformed("ModelInferRequest name", n)
			}
			if num == kserveName {
				name = v
			} else {
				ver = v
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, nil, malformed("ModelInferRequest field", n)
		}
		b = b[n:]
	}
	return name, ver, nil
}

// specTarget accumulates what the ModelSpec occurrences of a request say;
// repeated occurrences of a message field merge, so it spans all of them.
type specTarget struct {
	name []byte
	// versionKind tells which member of the version_choice oneof is set:
	// 0 none, specVersion or specVersionLabel.
	versionKind protowire.Number
	version     uint64
	label       []byte
}

// scan merges one serialized ModelSpec into t.
func (t *specTarget) scan(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return malformed("ModelSpec tag", n)
		}
		b = b[n:]
		if typ == protowire.BytesType {
			switch num {
			case specName, specVersion, specVersionLabel:
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return malformed("ModelSpec field", n)
				}
				b = b[n:]
				switch num {
				case specName:
					t.name = v
				case specVersionLabel:
					t.versionKind, t.label = specVersionLabel, v
				case specVersion:
					// A second Int64Value merges into the first only while
					// the oneof still holds it; otherwise it starts afresh.
					if t.versionKind != specVersion {
						t.versionKind, t.version = specVersion, 0
					}
					if err := t.scanInt64Value(v); err != nil {
						return err
					}
				}
				continue
			}
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return malformed("ModelSpec field", n)
		}
		b = b[n:]
	}
	return nil
}

// scanInt64Value reads the value of a serialized google.protobuf.Int64Value
// into t.version, last occurrence winning.
func (t *specTarget) scanInt64Value(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return malformed("Int64Value tag", n)
		}
		b = b[n:]
		if num == int64ValueValue && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return malformed("Int64Value value", n)
			}
			t.version = v
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return malformed("Int64Value field", n)
		}
		b = b[n:]
	}
	return nil
}

// PredictTarget returns the model name and version of a serialized
// TF-Serving PredictRequest, read from its model_spec (field 1) without
// unmarshalling the inputs. The version is the decimal ModelSpec.version, or
// else its version_label, or "" when neither is set. It serves the same way
// for GetModelMetadataRequest, ClassificationRequest and RegressionRequest,
// whose model_spec is field 1 too. Malformed bytes give an error wrapping
// ErrMalformed.
func PredictTarget(b []byte) (model, version string, err error) {
	var t specTarget
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", malformed("PredictRequest tag", n)
		}
		b = b[n:]
		if num == tfModelSpec && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", "", malformed("PredictRequest model_spec", n)
			}
			if err := t.scan(v); err != nil {
				return "", "", err
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", "", malformed("PredictRequest field", n)
		}
		b = b[n:]
	}
	return t.result()
}

// result returns the model name and version t found.
func (t *specTarget) result() (model, version string, err error) {
	switch t.versionKind {
	case specVersion:
		version = strconv.FormatInt(int64(t.version), 10)
	case specVersionLabel:
		version = string(t.label)
	}
	return string(t.name), version, nil
}
