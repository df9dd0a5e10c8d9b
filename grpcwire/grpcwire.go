// Package grpcwire holds gRPC's conventions on HTTP/2 in one place: the
// 5-byte message prefix, grpc-timeout, the status trailers (grpc-status,
// grpc-message, grpc-status-details-bin), the headers that are not
// metadata, and the codes a reset stream stands for. The relay reads and
// writes calls with it; the proxy writes the statuses it answers itself
// with it. Codes are codes.Code throughout.
//
// The rules are gRPC's "gRPC over HTTP2" document, and where it is silent,
// what grpc-go does (its internal/transport and internal/grpcutil, which
// cannot be imported).
package grpcwire

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/grpcwire/prefix"
)

// PrefixLen is the length of the prefix before each message (package
// prefix): a compressed flag and a 4-byte big-endian length.
const PrefixLen = prefix.Len

// ReadPrefix reads the message prefix at the start of b: whether the
// message is compressed and its length. ok is false when b is shorter than
// a prefix.
func ReadPrefix(b []byte) (compressed bool, n int, ok bool) {
	flag, l, ok := prefix.Read(b)
	return flag != 0, int(l), ok
}

// PutPrefix writes the prefix of an uncompressed message of n bytes into
// b[:PrefixLen].
func PutPrefix(b []byte, n int) { prefix.Put(b, n) }

// OneMessage returns the message of a body that holds exactly one
// uncompressed message, and false for any other body.
func OneMessage(body []byte) ([]byte, bool) {
	compressed, n, ok := ReadPrefix(body)
	if !ok || compressed || n != len(body)-PrefixLen {
		return nil, false
	}
	return body[PrefixLen:], true
}

// FirstMessage returns the first message of body when it is whole (the
// body may hold more), compressed or not.
func FirstMessage(body []byte) ([]byte, bool) {
	_, n, ok := ReadPrefix(body)
	if !ok || n > len(body)-PrefixLen {
		return nil, false
	}
	return body[PrefixLen : PrefixLen+n], true
}

// CountMessages is how many messages body holds: 0, 1, or 2 for two or
// more; -1 when it does not end where a message does.
func CountMessages(body []byte) int {
	n := 0
	for len(body) > 0 {
		_, l, ok := ReadPrefix(body)
		if !ok || l > len(body)-PrefixLen {
			return -1
		}
		body = body[PrefixLen+l:]
		if n++; n == 2 {
			return 2
		}
	}
	return n
}

// timeoutUnits are grpc-timeout's units, finest first.
var timeoutUnits = [...]struct {
	u time.Duration
	c byte
}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}}

// EncodeTimeout writes d as a grpc-timeout value: at most 8 digits, in the
// finest unit that fits, rounded up.
func EncodeTimeout(d time.Duration) string {
	for _, x := range timeoutUnits {
		v := d / x.u // rounded up below; d + x.u - 1 overflows near the maximum
		if d%x.u != 0 {
			v++
		}
		if v < 1e8 {
			return strconv.FormatInt(int64(v), 10) + string(x.c)
		}
	}
	return "99999999H"
}

// DecodeTimeout reads a grpc-timeout value.
func DecodeTimeout(s string) (time.Duration, bool) {
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	v, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	for _, x := range timeoutUnits {
		if x.c != s[len(s)-1] {
			continue
		}
		if v > int64((1<<63-1)/x.u) {
			return 1<<63 - 1, true
		}
		return time.Duration(v) * x.u, true
	}
	return 0, false
}

// ResetCode is the code grpc-go reports for a stream its peer reset with
// code (its http2ErrConvTab).
func ResetCode(code http2.ErrCode) codes.Code {
	switch code {
	case http2.ErrCodeFlowControl, http2.ErrCodeFrameSize, http2.ErrCodeEnhanceYourCalm:
		return codes.ResourceExhausted
	case http2.ErrCodeRefusedStream:
		return codes.Unavailable
	case http2.ErrCodeCancel:
		return codes.Canceled
	case http2.ErrCodeInadequateSecurity:
		return codes.PermissionDenied
	}
	return codes.Internal
}

// ReadStatus reads grpc-status and grpc-message from trailer fields; ok
// is false when there is no grpc-status. A grpc-status that is not a
// number reads as UNKNOWN, saying so.
func ReadStatus(fields []hpack.HeaderField) (code codes.Code, msg string, ok bool) {
	for _, f := range fields {
		switch f.Name {
		case "grpc-status":
			v, err := strconv.ParseUint(f.Value, 10, 32)
			if err != nil {
				return codes.Unknown, "malformed grpc-status " + strconv.Quote(f.Value), true
			}
			code, ok = codes.Code(v), true
		case "grpc-message":
			msg = DecodeMessage(f.Value)
		}
	}
	return code, msg, ok
}

// Status is a status to write: its code, message and, when not nil, the
// serialized google.rpc.Status of grpc-status-details-bin.
type Status struct {
	Code    codes.Code
	Message string
	Details []byte
}

// AppendStatus appends the fields that end a call with st: trailers-only
// (":status" and content-type first) when no response header went out,
// with content-type application/grpc and subtype ("proto", "json") when
// given. It is the one writer of status trailers.
func AppendStatus(f []hpack.HeaderField, trailersOnly bool, subtype string, st Status) []hpack.HeaderField {
	if trailersOnly {
		f = AppendResponseHeader(f, subtype)
	}
	f = append(f, hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(st.Code))})
	if st.Message != "" {
		f = append(f, hpack.HeaderField{Name: "grpc-message", Value: EncodeMessage(st.Message)})
	}
	if len(st.Details) > 0 {
		f = append(f, hpack.HeaderField{Name: "grpc-status-details-bin", Value: base64.RawStdEncoding.EncodeToString(st.Details)})
	}
	return f
}

// AppendResponseHeader appends what opens a response: :status 200 and the
// content-type of subtype ("" for application/grpc).
func AppendResponseHeader(f []hpack.HeaderField, subtype string) []hpack.HeaderField {
	ct := "application/grpc"
	if subtype != "" {
		ct += "+" + subtype
	}
	return append(f, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: ct})
}

// AppendMetadata appends md as header fields, the way grpc-go writes
// metadata: reserved keys left out (ResponseMetadataPasses), binary
// values in unpadded base64.
func AppendMetadata(f []hpack.HeaderField, md map[string][]string) []hpack.HeaderField {
	for k, vs := range md {
		if !ResponseMetadataPasses(k) {
			continue
		}
		bin := strings.HasSuffix(k, "-bin")
		for _, v := range vs {
			if bin {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			f = append(f, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return f
}

// DecodeBinHeader decodes a binary (-bin) header value, padded or not.
func DecodeBinHeader(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// ContentSubtype returns the part of a gRPC content-type after
// "application/grpc+" or "application/grpc;", lower-cased ("proto",
// "json"), or "" for application/grpc and anything else.
func ContentSubtype(ct string) string {
	const base = "application/grpc"
	if len(ct) <= len(base)+1 || !strings.EqualFold(ct[:len(base)], base) {
		return ""
	}
	switch ct[len(base)] {
	case '+', ';':
		return strings.ToLower(ct[len(base)+1:])
	}
	return ""
}

// EncodeMessage percent-encodes a grpc-message value, as the gRPC HTTP/2
// spec asks.
func EncodeMessage(msg string) string {
	const hex = "0123456789ABCDEF"
	clean := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < ' ' || c > '~' || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	b := make([]byte, 0, len(msg)+16)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(b)
}

// DecodeMessage reads a percent-encoded grpc-message value.
func DecodeMessage(msg string) string {
	if strings.IndexByte(msg, '%') < 0 {
		return msg
	}
	b := make([]byte, 0, len(msg))
	for i := 0; i < len(msg); i++ {
		if msg[i] == '%' && i+2 < len(msg) {
			if v, err := strconv.ParseUint(msg[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(v))
				i += 2
				continue
			}
		}
		b = append(b, msg[i])
	}
	return string(b)
}
