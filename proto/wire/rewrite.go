package wire

import "google.golang.org/protobuf/encoding/protowire"

// RewriteModelInferName returns a copy of a serialized KServe v2
// ModelInferRequest whose model name (field 1) is name: every existing name
// field is dropped, one new one is written first, and all other bytes are
// kept as they are and in their order. The input is not modified. Like
// ModelInferTarget it serves every KServe v2 request whose name is field 1.
// Malformed bytes give an error wrapping ErrMalformed.
func RewriteModelInferName(b []byte, name string) ([]byte, error) {
	out := make([]byte, 0, protowire.SizeTag(kserveName)+protowire.SizeBytes(len(name))+len(b))
	out = protowire.AppendTag(out, kserveName, protowire.BytesType)
	out = protowire.AppendString(out, name)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, malformed("ModelInferRequest tag", n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, malformed("ModelInferRequest field", m)
		}
		if !(num == kserveName && typ == protowire.BytesType) {
			out = append(out, b[:n+m]...)
		}
		b = b[n+m:]
	}
	return out, nil
}

// RewritePredictName returns a copy of a serialized TF-Serving
// PredictRequest whose model_spec.name is name. All model_spec occurrences
// are merged into one (concatenating serialized messages is how protobuf
// merges them), written first, with every name field dropped and the new
// name written first inside it; a missing model_spec is created. All other
// bytes are kept as they are and in their order, and the input is not
// modified. Like PredictTarget it serves every TF-Serving request whose
// model_spec is field 1. Malformed bytes give an error wrapping ErrMalformed.
func RewritePredictName(b []byte, name string) ([]byte, error) {
	// First pass: validate, and size the merged ModelSpec without its names.
	specLen := protowire.SizeTag(specName) + protowire.SizeBytes(len(name))
	rest := 0
	for p := b; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return nil, malformed("PredictRequest tag", n)
		}
		m := protowire.ConsumeFieldValue(num, typ, p[n:])
		if m < 0 {
			return nil, malformed("PredictRequest field", m)
		}
		if num == tfModelSpec && typ == protowire.BytesType {
			spec, _ := protowire.ConsumeBytes(p[n:])
			kept, err := specWithoutName(nil, spec)
			if err != nil {
				return nil, err
			}
			specLen += kept
		} else {
			rest += n + m
		}
		p = p[n+m:]
	}

	out := make([]byte, 0, protowire.SizeTag(tfModelSpec)+protowire.SizeBytes(specLen)+rest)
	out = protowire.AppendTag(out, tfModelSpec, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(specLen))
	out = protowire.AppendTag(out, specName, protowire.BytesType)
	out = protowire.AppendString(out, name)
	// Second pass: the merged ModelSpec body, then every other field. The
	// first pass validated the bytes, so errors cannot happen here.
	for p := b; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		m := protowire.ConsumeFieldValue(num, typ, p[n:])
		if num == tfModelSpec && typ == protowire.BytesType {
			spec, _ := protowire.ConsumeBytes(p[n:])
			_, _ = specWithoutName(&out, spec)
		}
		p = p[n+m:]
	}
	for p := b; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		m := protowire.ConsumeFieldValue(num, typ, p[n:])
		if !(num == tfModelSpec && typ == protowire.BytesType) {
			out = append(out, p[:n+m]...)
		}
		p = p[n+m:]
	}
	return out, nil
}

// specWithoutName returns how many bytes of the serialized ModelSpec spec
// are not name fields, appending those bytes to *out when out is not nil.
func specWithoutName(out *[]byte, spec []byte) (int, error) {
	kept := 0
	for len(spec) > 0 {
		num, typ, n := protowire.ConsumeTag(spec)
		if n < 0 {
			return 0, malformed("ModelSpec tag", n)
		}
		m := protowire.ConsumeFieldValue(num, typ, spec[n:])
		if m < 0 {
			return 0, malformed("ModelSpec field", m)
		}
		if !(num == specName && typ == protowire.BytesType) {
			kept += n + m
			if out != nil {
				*out = append(*out, spec[:n+m]...)
			}
		}
		spec = spec[n+m:]
	}
	return kept, nil
}
