package h2relay

import (
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// gRPC's wire conventions the relay reads and writes: grpc-timeout,
// grpc-status and grpc-message, the status of a reset stream.

// timeoutUnits are grpc-timeout's units, finest first.
var timeoutUnits = [...]struct {
	u time.Duration
	c byte
}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}}

// encodeTimeout writes d as a grpc-timeout value: at most 8 digits, in the
// finest unit that fits, rounded up.
func encodeTimeout(d time.Duration) string {
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

// decodeTimeout reads a grpc-timeout value.
func decodeTimeout(s string) (time.Duration, bool) {
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

// resetCode is the gRPC code grpc-go reports for a stream its peer reset
// with code (its http2ErrConvTab).
func resetCode(code http2.ErrCode) uint32 {
	switch code {
	case http2.ErrCodeFlowControl, http2.ErrCodeFrameSize, http2.ErrCodeEnhanceYourCalm:
		return 8 // RESOURCE_EXHAUSTED
	case http2.ErrCodeRefusedStream:
		return 14 // UNAVAILABLE
	case http2.ErrCodeCancel:
		return 1 // CANCELED
	case http2.ErrCodeInadequateSecurity:
		return 7 // PERMISSION_DENIED
	}
	return 13 // INTERNAL
}

// grpcStatus reads grpc-status and grpc-message from trailer fields.
func grpcStatus(fields []hpack.HeaderField) (code uint32, msg string, ok bool) {
	for _, f := range fields {
		switch f.Name {
		case "grpc-status":
			v, err := strconv.ParseUint(f.Value, 10, 32)
			if err != nil {
				return 2, "malformed grpc-status " + strconv.Quote(f.Value), true // UNKNOWN
			}
			code, ok = uint32(v), true
		case "grpc-message":
			msg = decodeGrpcMessage(f.Value)
		}
	}
	return code, msg, ok
}

// EncodeGrpcMessage percent-encodes a grpc-message value, as the gRPC
// HTTP/2 spec asks.
func EncodeGrpcMessage(msg string) string {
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

func decodeGrpcMessage(msg string) string {
	if !containsByte(msg, '%') {
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

func containsByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

// statusFields are the fields of a status the relay sends itself:
// trailers-only when no response header went out yet.
func statusFields(trailersOnly bool, code uint32, msg string) []hpack.HeaderField {
	f := make([]hpack.HeaderField, 0, 4)
	if trailersOnly {
		f = append(f, hpack.HeaderField{Name: ":status", Value: "200"},
			hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	}
	f = append(f, hpack.HeaderField{Name: "grpc-status", Value: strconv.FormatUint(uint64(code), 10)})
	if msg != "" {
		f = append(f, hpack.HeaderField{Name: "grpc-message", Value: EncodeGrpcMessage(msg)})
	}
	return f
}
