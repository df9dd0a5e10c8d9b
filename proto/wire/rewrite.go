package wire

import (
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// RewriteModelInferTarget returns a copy of a serialized KServe v2
// ModelInferRequest whose model name (field 1) is name and whose version
// (field 2) is version: every existing name and version field is dropped,
// one new name is written first and, when version is not "", one new
// version right after it; all other bytes are kept as they are and in
// their order. The input is not modified. An empty version therefore
// leaves none, which KServe servers read as "the server's choice of
// version" — the only way to say that, as "" is proto3's default. Like
// ModelInferTarget it serves every KServe v2 request whose name and
// version are fields 1 and 2. Malformed bytes give an error wrapping
// ErrMalformed.
func RewriteModelInferTarget(b []byte, name, version string) ([]byte, error) {
	return rewriteKServe(b, name, version, true)
}

// rewriteKServe writes name, then version when setVersion and it is not "",
// then every field of b but the names (and the versions when setVersion).
// Only fields of the string wire type are dropped: a field 1 or 2 of another
// wire type is an unknown field to proto, kept like any other.
func rewriteKServe(b []byte, name, version string, setVersion bool) ([]byte, error) {
	writeVersion := setVersion && version != ""
	size := protowire.SizeTag(kserveName) + protowire.SizeBytes(len(name)) + len(b)
	if writeVersion {
		size += protowire.SizeTag(kserveVersion) + protowire.SizeBytes(len(version))
	}
	out := make([]byte, 0, size)
	out = protowire.AppendTag(out, kserveName, protowire.BytesType)
	out = protowire.AppendString(out, name)
	if writeVersion {
		out = protowire.AppendTag(out, kserveVersion, protowire.BytesType)
		out = protowire.AppendString(out, version)
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, malformed("ModelInferRequest tag", n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, malformed("ModelInferRequest field", m)
		}
		drop := typ == protowire.BytesType && (num == kserveName || setVersion && num == kserveVersion)
		if !drop {
			out = append(out, b[:n+m]...)
		}
		b = b[n+m:]
	}
	return out, nil
}

// RewritePredictTarget returns a copy of a serialized TF-Serving
// PredictRequest whose model_spec.name is name and whose version is
// version. All model_spec occurrences are merged into one (concatenating
// serialized messages is how protobuf merges them), written first, with
// every name field dropped and the new name written first inside it; a
// missing model_spec is created. All other bytes are kept as they are and
// in their order, and the input is not modified. Like PredictTarget it
// serves every TF-Serving request whose model_spec is field 1. Malformed
// bytes give an error wrapping ErrMalformed.
//
// Inside the merged model_spec every version and version_label field is
// dropped (both members of the version_choice oneof, so no older one can
// survive the merge) and, when version is not "", one new one is written
// last in the model_spec: a decimal integer (as strconv.ParseInt accepts it)
// as version, a google.protobuf.Int64Value, anything else as version_label.
// Last because Go's marshal writes oneof members after the other fields, so
// a request a Go client marshalled comes out as that client would marshal
// the new one, and because the last member of a oneof is the one that counts.
// PredictTarget reads the result back as (name, version), except that a
// non-canonical integer such as "07" or "+7" reads back as "7".
func RewritePredictTarget(b []byte, name, version string) ([]byte, error) {
	e := specEdit{name: name, setVersion: true}
	if version != "" {
		if v, err := strconv.ParseInt(version, 10, 64); err == nil {
			e.versionKind, e.version = specVersion, v
		} else {
			e.versionKind, e.label = specVersionLabel, version
		}
	}
	return rewriteSpec(b, &e)
}

// specEdit says how a rewrite changes a ModelSpec.
type specEdit struct {
	name string
	// setVersion drops every member of the version_choice oneof; the one
	// versionKind names (0: none) is written last.
	setVersion  bool
	versionKind protowire.Number
	version     int64
	label       string
}

// int64ValueLen is the size of a serialized Int64Value holding v; proto3
// writes nothing for 0.
func int64ValueLen(v int64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(int64ValueValue) + protowire.SizeVarint(uint64(v))
}

// nameLen is the size of the name field e writes first in the ModelSpec.
func (e *specEdit) nameLen() int {
	return protowire.SizeTag(specName) + protowire.SizeBytes(len(e.name))
}

// versionLen is the size of the version field e writes last in the
// ModelSpec.
func (e *specEdit) versionLen() int {
	switch e.versionKind {
	case specVersion:
		return protowire.SizeTag(specVersion) + protowire.SizeBytes(int64ValueLen(e.version))
	case specVersionLabel:
		return protowire.SizeTag(specVersionLabel) + protowire.SizeBytes(len(e.label))
	}
	return 0
}

// appendVersion appends the version field e writes last in the ModelSpec.
func (e *specEdit) appendVersion(out []byte) []byte {
	switch e.versionKind {
	case specVersion:
		out = protowire.AppendTag(out, specVersion, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(int64ValueLen(e.version)))
		if e.version != 0 {
			out = protowire.AppendTag(out, int64ValueValue, protowire.VarintType)
			out = protowire.AppendVarint(out, uint64(e.version))
		}
	case specVersionLabel:
		out = protowire.AppendTag(out, specVersionLabel, protowire.BytesType)
		out = protowire.AppendString(out, e.label)
	}
	return out
}

// drops reports whether a ModelSpec field is left out of the rewrite. As
// for the names, only fields of the wire type proto reads are dropped.
func (e *specEdit) drops(num protowire.Number, typ protowire.Type) bool {
	if typ != protowire.BytesType {
		return false
	}
	return num == specName || e.setVersion && (num == specVersion || num == specVersionLabel)
}

// rewriteSpec is RewritePredictTarget (and, keeping the version, the tests'
// RewritePredictName): the merged model_spec first (the new name, the
// fields e keeps, the new version), then every other field of b.
func rewriteSpec(b []byte, e *specEdit) ([]byte, error) {
	// First pass: validate, and size the merged ModelSpec without the
	// fields e drops.
	specLen := e.nameLen() + e.versionLen()
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
			kept, err := specKept(nil, spec, e)
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
	out = protowire.AppendString(out, e.name)
	// Second pass: the merged ModelSpec body, then every other field. The
	// first pass validated the bytes, so errors cannot happen here.
	for p := b; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		m := protowire.ConsumeFieldValue(num, typ, p[n:])
		if num == tfModelSpec && typ == protowire.BytesType {
			spec, _ := protowire.ConsumeBytes(p[n:])
			_, _ = specKept(&out, spec, e)
		}
		p = p[n+m:]
	}
	out = e.appendVersion(out)
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

// specKept returns how many bytes of the serialized ModelSpec spec e keeps,
// appending those bytes to *out when out is not nil. Dropped fields are
// skipped by length, unread: a malformed Int64Value that a rewrite replaces
// is no error.
func specKept(out *[]byte, spec []byte, e *specEdit) (int, error) {
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
		if !e.drops(num, typ) {
			kept += n + m
			if out != nil {
				*out = append(*out, spec[:n+m]...)
			}
		}
		spec = spec[n+m:]
	}
	return kept, nil
}
