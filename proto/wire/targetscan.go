package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/infergate/infergate/grpcwire/prefix"
)

// TargetKind says where a request message keeps its routing target, and so
// which whole-message function a TargetScanner agrees with. The zero
// TargetKind is no kind: a scanner made for it refuses every byte.
type TargetKind uint8

const (
	// KServeTarget reads model name and version as the string fields 1
	// and 2, as ModelInferTarget does: ModelInferRequest and the other
	// KServe v2 requests laid out the same way.
	KServeTarget TargetKind = iota + 1
	// TFServingTarget reads the name and version of the ModelSpec in field
	// 1, as PredictTarget does: PredictRequest, GetModelMetadataRequest,
	// ClassificationRequest, RegressionRequest.
	TFServingTarget
)

// String returns the name of the kind.
func (k TargetKind) String() string {
	switch k {
	case KServeTarget:
		return "kserve"
	case TFServingTarget:
		return "tfserving"
	}
	return "TargetKind(" + strconv.Itoa(int(k)) + ")"
}

// MaxTargetLen caps the bytes of one model name, version or version label
// a TargetScanner holds. Real names are tens of bytes; without a cap a
// client could make the proxy buffer a "name" as large as the message.
const MaxTargetLen = 4 << 10

// ErrUnroutable is wrapped by the errors a TargetScanner returns for bytes
// that may well be a valid message but that it will not route: a value over
// MaxTargetLen, a group, a compressed message. Where the scanner returns
// one of these, the whole-message functions may still read a target; the
// caller sends such a request down a path that holds the whole message (or
// refuses it), never routes it by a guess.
var ErrUnroutable = errors.New("unroutable request")

var (
	// ErrTargetTooLong: an occurrence of the name, version or version
	// label, even one a later field overrides, is longer than MaxTargetLen.
	ErrTargetTooLong = fmt.Errorf("model name or version longer than %d bytes: %w", MaxTargetLen, ErrUnroutable)
	// ErrCompressed: the first message's prefix has the compressed flag
	// set, so its bytes cannot be scanned as they pass.
	ErrCompressed = fmt.Errorf("compressed message: %w", ErrUnroutable)
	// ErrGroup: a field with the group wire type (3). proto3 has no
	// groups; skipping one, nested, would take a stack of field numbers
	// as deep as the client likes, which a scanner of O(1) state cannot
	// keep, so it refuses rather than accept what it cannot check.
	ErrGroup = fmt.Errorf("group field: %w", ErrUnroutable)
)

// scanState is what a TargetScanner expects next inside the first message.
type scanState uint8

const (
	stTag    scanState = iota // a field tag
	stVarint                  // a varint value
	stLen                     // the length of a length-delimited value
	stSkip                    // rest more bytes to pass over
	stString                  // rest more bytes of a target string
)

// targetField is what the value being read sets.
type targetField uint8

const (
	fNone      targetField = iota // nothing: skipped
	fName                         // the model name
	fVersion                      // KServe model_version
	fLabel                        // ModelSpec.version_label
	fSpec                         // PredictRequest.model_spec: entered
	fInt64Msg                     // ModelSpec.version: entered
	fInt64Data                    // Int64Value.value
)

// Levels of nesting the scanner enters: the message, a ModelSpec, and an
// Int64Value inside it. It never goes deeper; every other length-delimited
// field is passed over by its length.
const (
	levelMessage = iota
	levelSpec
	levelInt64
	levels
)

// TargetScanner reads the routing target (model name and version) of a
// gRPC request body as it arrives, in chunks of any size, so that a proxy
// can route a request from its first bytes and forward the rest as it
// passes (cut-through) while the scan goes on to the end: a
// later occurrence of a field overrides an earlier one in protobuf, and
// the proxy must learn of it before the upstream gets the whole message.
//
// It keeps O(1) state whatever the message size: a partial tag or varint,
// the offsets where the open submessages end, and the target strings
// themselves, each capped at MaxTargetLen. It never keeps a reference to a
// chunk. A skipped field (a tensor's bytes) costs O(1) per chunk, not per
// byte: the scanner only subtracts the chunk's length from what is left.
//
// The body is gRPC's framing: each message is a 5-byte prefix (compressed
// flag, big-endian length) followed by the message. The first message is
// scanned; the scanner only counts and frames those after it, so that the
// caller can apply gRPC's cardinality rule to a unary method (Messages).
//
// Agreement with the whole-message functions: once the first message is
// complete (Done) without an error, Target returns exactly what
// ModelInferTarget (KServeTarget) or PredictTarget (TFServingTarget) return
// for that message, however it was cut. Where those return an error, the
// scanner has returned one too by the time the message's last byte was fed
// (the prefix gives the message's end, so a length past it is an error as
// soon as it is read). Each of its errors wraps ErrMalformed, when the
// bytes are not a valid message, or ErrUnroutable, when they may be one
// the scanner declines (see ErrUnroutable); an error wrapping ErrMalformed
// means the whole-message functions fail too. After an error, Feed and End
// return the same error and the other results mean nothing.
//
// A TargetScanner is not safe for concurrent use; it belongs to the one
// goroutine that reads the stream. Make one with NewTargetScanner, or
// reuse one with Reset, which keeps its buffers.
type TargetScanner struct {
	kind TargetKind
	err  error

	// The gRPC framing.
	msgs int              // messages begun, counted at their first prefix byte
	hdr  [prefix.Len]byte // the prefix read so far
	nhdr int              // bytes in hdr
	body bool             // inside a message's bytes
	left uint64           // bytes left of a later message, skipped
	done bool             // the first message has ended

	// The scan of the first message.
	pos   uint64         // bytes of it read
	ends  [levels]uint64 // where each open level ends, as a pos
	depth int            // the innermost open level
	state scanState
	dest  targetField // what the value being read sets
	rest  uint64      // bytes left of a value skipped or collected
	vb    [binaryMaxVarintLen]byte
	nvb   int // bytes of a varint split across chunks, in vb

	// The target. pastRun is set at the first top-level field that
	// cannot carry the target; named once a name field has been read.
	pastRun, named, known, changed bool

	name    []byte
	version []byte // KServe model_version, or TF version_label
	// vkind is the member of ModelSpec's version_choice set last (0,
	// specVersion or specVersionLabel) and vnum the Int64Value's value,
	// as specTarget keeps them.
	vkind protowire.Number
	vnum  uint64
	// scratch collects a string value; it is swapped in once complete,
	// so that name and version never show half a value.
	scratch []byte
	// repName and repVersion are the target as it was when it became
	// known, against which later fields are checked.
	repName, repVersion []byte
	// verBuf holds the decimal of vnum.
	verBuf [20]byte
}

// NewTargetScanner returns a scanner for a request body of the given kind.
func NewTargetScanner(kind TargetKind) *TargetScanner {
	s := new(TargetScanner)
	s.Reset(kind)
	return s
}

// Reset makes s a new scanner for a body of the given kind, keeping the
// buffers it has grown, so that a pooled scanner scans without allocating.
func (s *TargetScanner) Reset(kind TargetKind) {
	*s = TargetScanner{
		kind:       kind,
		name:       s.name[:0],
		version:    s.version[:0],
		scratch:    s.scratch[:0],
		repName:    s.repName[:0],
		repVersion: s.repVersion[:0],
	}
}

// Feed scans the next chunk of the request body. It keeps no reference to
// chunk. It returns the first error met in the body so far.
func (s *TargetScanner) Feed(chunk []byte) error {
	if s.err != nil {
		return s.err
	}
	if s.kind != KServeTarget && s.kind != TFServingTarget {
		s.err = fmt.Errorf("wire: TargetScanner for %v", s.kind)
		return s.err
	}
	p := chunk
	for s.err == nil {
		if s.body && s.msgs == 1 {
			// The first message: close each level it has reached the end
			// of (its message last), then read within the innermost one.
			if s.pos == s.ends[s.depth] {
				s.endLevel()
				continue
			}
			if len(p) == 0 {
				break
			}
			n := s.step(p[:min(uint64(len(p)), s.ends[s.depth]-s.pos)])
			p = p[n:]
			continue
		}
		if len(p) == 0 {
			break
		}
		if s.body {
			// A later message: framed and counted, never read.
			k := min(s.left, uint64(len(p)))
			p, s.left = p[k:], s.left-k
			s.body = s.left > 0
			continue
		}
		if s.nhdr == 0 {
			s.msgs++
		}
		k := copy(s.hdr[s.nhdr:], p)
		p, s.nhdr = p[k:], s.nhdr+k
		if s.nhdr == prefix.Len {
			s.startMessage()
		}
	}
	return s.err
}

// End tells s that the body ended (the stream's END_STREAM). It returns an
// error when a message was cut short, else the error Feed returned, if
// any. A body with no message at all is no error here: Messages says so.
func (s *TargetScanner) End() error {
	if s.err == nil && (s.nhdr > 0 || s.body) {
		s.err = malformedErr("gRPC message", io.ErrUnexpectedEOF)
	}
	return s.err
}

// Err returns the error Feed or End returned, if any.
func (s *TargetScanner) Err() error { return s.err }

// Known reports whether the target has been reported: from then on a
// proxy may route by Reported. The target becomes known at the first
// top-level field that cannot carry it (any field but 1 and 2 for
// KServeTarget, any but 1 for TFServingTarget) once a name has been read
// before it, or else when the first message ends. Serializers write fields
// in number order, so for every real client it is known a few bytes into
// the message, before any tensor; a message that puts its name after
// other fields is known only when it ends.
func (s *TargetScanner) Known() bool { return s.known }

// Changed reports whether a field read after the target became known made
// it differ from the reported one, even if a still later field set it
// back. For TFServingTarget the check is made at the end of each
// model_spec occurrence, since those merge as a whole. A proxy resets such
// a stream, so that no client can be routed by one name and served by
// another; it does not wait to see whether the message ends where it began.
func (s *TargetScanner) Changed() bool { return s.changed }

// Done reports whether the first message has been read to its end.
func (s *TargetScanner) Done() bool { return s.done }

// Messages returns the number of messages the body has begun: a message
// counts from the first byte of its prefix. Any value over 1 breaks the
// cardinality of a unary method.
func (s *TargetScanner) Messages() int { return s.msgs }

// Target returns the model name and version read so far (for
// TFServingTarget, possibly partway through a model_spec). Once Done
// without an error, it is what the whole-message function returns.
func (s *TargetScanner) Target() (model, version string) {
	m, v := s.TargetBytes()
	return string(m), string(v)
}

// TargetBytes is Target without allocating: the slices are s's own and
// hold only until the next call of a method of s.
func (s *TargetScanner) TargetBytes() (model, version []byte) {
	return s.name, s.curVersion()
}

// Reported returns the target as it was when it became known ("" before).
func (s *TargetScanner) Reported() (model, version string) {
	return string(s.repName), string(s.repVersion)
}

// curVersion is the version as the whole-message function formats it.
func (s *TargetScanner) curVersion() []byte {
	if s.kind == KServeTarget {
		return s.version
	}
	switch s.vkind {
	case specVersion:
		return strconv.AppendInt(s.verBuf[:0], int64(s.vnum), 10)
	case specVersionLabel:
		return s.version
	}
	return nil
}

// startMessage acts on a complete prefix.
func (s *TargetScanner) startMessage() {
	flag, n, _ := prefix.Read(s.hdr[:])
	s.nhdr = 0
	if flag > 1 {
		s.err = malformedErr("gRPC message prefix", fmt.Errorf("compressed flag %d", flag))
		return
	}
	if s.msgs > 1 {
		s.left = uint64(n)
		s.body = n > 0
		return
	}
	if flag == 1 {
		s.err = fmt.Errorf("wire: first message: %w", ErrCompressed)
		return
	}
	s.body, s.ends[levelMessage] = true, uint64(n)
}

// endLevel closes the innermost level, whose end has been reached.
func (s *TargetScanner) endLevel() {
	// Lengths and fixed-size values are checked against the level's end
	// when they begin, so only a varint can be cut by it.
	if s.state != stTag || s.nvb != 0 {
		s.err = malformedErr(s.where(), io.ErrUnexpectedEOF)
		return
	}
	switch s.depth {
	case levelInt64:
		s.depth = levelSpec
	case levelSpec:
		s.depth = levelMessage
		s.check()
	default:
		s.body, s.done = false, true
		if !s.known {
			s.report()
		}
	}
}

// step reads one token (a tag, a varint, or a run of bytes of a value) from
// p, which ends no later than the innermost level, and returns the bytes
// it consumed: at least one.
func (s *TargetScanner) step(p []byte) int {
	switch s.state {
	case stSkip:
		k := min(s.rest, uint64(len(p)))
		s.pos, s.rest = s.pos+k, s.rest-k
		if s.rest == 0 {
			s.state = stTag
		}
		return int(k)
	case stString:
		k := min(s.rest, uint64(len(p)))
		s.scratch = append(s.scratch, p[:k]...)
		s.pos, s.rest = s.pos+k, s.rest-k
		if s.rest == 0 {
			s.setString()
		}
		return int(k)
	}
	v, n, ok := s.varint(p)
	s.pos += uint64(n)
	if !ok {
		return n
	}
	switch s.state {
	case stTag:
		s.tag(v)
	case stVarint:
		if s.dest == fInt64Data {
			s.vnum = v
		}
		s.state = stTag
	case stLen:
		s.length(v)
	}
	return n
}

// varint reads a varint from p, or the rest of one begun in an earlier
// chunk. ok is false when p ends first (the bytes are kept in vb) or on an
// error.
func (s *TargetScanner) varint(p []byte) (v uint64, n int, ok bool) {
	if s.nvb == 0 {
		v, n := protowire.ConsumeVarint(p)
		if n >= 0 {
			return v, n, true
		}
		if len(p) >= binaryMaxVarintLen {
			s.err = malformed(s.where(), n)
			return 0, 0, false
		}
		// Fewer than 10 bytes, each with the continuation bit: the rest
		// comes with the next chunk.
		s.nvb = copy(s.vb[:], p)
		return 0, len(p), false
	}
	for n < len(p) && s.nvb < binaryMaxVarintLen {
		c := p[n]
		n++
		s.vb[s.nvb] = c
		s.nvb++
		if c < 0x80 {
			break
		}
	}
	if s.vb[s.nvb-1] >= 0x80 && s.nvb < binaryMaxVarintLen {
		return 0, n, false
	}
	v, m := protowire.ConsumeVarint(s.vb[:s.nvb])
	s.nvb = 0
	if m < 0 {
		s.err = malformed(s.where(), m)
		return 0, n, false
	}
	return v, n, true
}

// tag acts on a complete tag.
func (s *TargetScanner) tag(v uint64) {
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		s.err = malformedErr(s.where()+" tag", errFieldNumber)
		return
	}
	if s.depth == levelMessage && !s.pastRun && (typ != protowire.BytesType || !s.carriesTarget(num)) {
		s.pastRun = true
		if s.named {
			s.report()
		}
	}
	s.dest = fNone
	switch typ {
	case protowire.VarintType:
		s.state = stVarint
		if s.depth == levelInt64 && num == int64ValueValue {
			s.dest = fInt64Data
		}
	case protowire.Fixed32Type:
		s.fixed(4)
	case protowire.Fixed64Type:
		s.fixed(8)
	case protowire.BytesType:
		s.state = stLen
		s.dest = s.bytesField(num)
	case protowire.StartGroupType:
		s.err = fmt.Errorf("wire: %s field %d: %w", s.where(), num, ErrGroup)
	case protowire.EndGroupType:
		s.err = malformedErr(s.where()+" field", errEndGroup)
	default:
		s.err = malformedErr(s.where()+" field", errReserved)
	}
}

// carriesTarget reports whether top-level field num (length-delimited) may
// hold the target.
func (s *TargetScanner) carriesTarget(num protowire.Number) bool {
	if s.kind == KServeTarget {
		return num == kserveName || num == kserveVersion
	}
	return num == tfModelSpec
}

// bytesField returns what the length-delimited field num at the current
// level sets.
func (s *TargetScanner) bytesField(num protowire.Number) targetField {
	switch {
	case s.depth == levelMessage && s.kind == KServeTarget:
		switch num {
		case kserveName:
			return fName
		case kserveVersion:
			return fVersion
		}
	case s.depth == levelMessage:
		if num == tfModelSpec {
			return fSpec
		}
	case s.depth == levelSpec:
		switch num {
		case specName:
			return fName
		case specVersion:
			return fInt64Msg
		case specVersionLabel:
			return fLabel
		}
	}
	return fNone
}

// fixed begins a fixed-size value of n bytes.
func (s *TargetScanner) fixed(n uint64) {
	if n > s.ends[s.depth]-s.pos {
		s.err = malformedErr(s.where()+" field", io.ErrUnexpectedEOF)
		return
	}
	s.state, s.rest = stSkip, n
}

// length acts on the length n of a length-delimited value.
func (s *TargetScanner) length(n uint64) {
	if n > s.ends[s.depth]-s.pos {
		s.err = malformedErr(s.where()+" field", io.ErrUnexpectedEOF)
		return
	}
	s.state = stTag
	switch s.dest {
	case fNone:
		if n > 0 {
			s.state, s.rest = stSkip, n
		}
	case fSpec:
		s.depth, s.ends[levelSpec] = levelSpec, s.pos+n
	case fInt64Msg:
		// A second Int64Value merges into the first only while the oneof
		// still holds it, as in specTarget.scan.
		if s.vkind != specVersion {
			s.vkind, s.vnum = specVersion, 0
		}
		s.depth, s.ends[levelInt64] = levelInt64, s.pos+n
	default:
		if n > MaxTargetLen {
			s.err = fmt.Errorf("wire: %s: %w", s.where(), ErrTargetTooLong)
			return
		}
		s.scratch = s.scratch[:0]
		if n == 0 {
			s.setString()
		} else {
			s.state, s.rest = stString, n
		}
	}
}

// setString stores the string value collected in scratch.
func (s *TargetScanner) setString() {
	s.state = stTag
	switch s.dest {
	case fName:
		s.name, s.scratch = s.scratch, s.name
		s.named = true
	case fVersion:
		s.version, s.scratch = s.scratch, s.version
	case fLabel:
		s.version, s.scratch = s.scratch, s.version
		s.vkind = specVersionLabel
	}
	if s.depth == levelMessage {
		s.check() // a KServe name or version: a top-level field
	}
}

// report makes the target known as it stands.
func (s *TargetScanner) report() {
	s.known = true
	s.repName = append(s.repName[:0], s.name...)
	s.repVersion = append(s.repVersion[:0], s.curVersion()...)
}

// check, called when a top-level field that carries the target ends,
// notes whether the target now differs from the one reported.
func (s *TargetScanner) check() {
	if s.known && !s.changed && (!bytes.Equal(s.name, s.repName) || !bytes.Equal(s.curVersion(), s.repVersion)) {
		s.changed = true
	}
}

// where names the message being read, for errors.
func (s *TargetScanner) where() string {
	switch {
	case s.depth == levelInt64:
		return "Int64Value"
	case s.depth == levelSpec:
		return "ModelSpec"
	case s.kind == KServeTarget:
		return "ModelInferRequest"
	}
	return "PredictRequest"
}
