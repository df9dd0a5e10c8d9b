package grpcwire

import (
	"fmt"
	"strings"
	"sync/atomic"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/encoding"
)

// The header policy: which headers a call carries upstream and which come
// back, for both doors of the proxy, and the names of infergate's own
// headers. A unary call reaches the upstream by one of two doors:
//
//   - forwarded: the relay sends the client's header fields on
//     (ForwardField decides each one);
//   - served: the pipeline sends the call with grpc-go's client, from the
//     client's metadata (MetadataPasses decides each key; grpc-go writes
//     the fields a transport owns itself).
//
// The rule is what a direct connection would deliver. The client's
// metadata passes unchanged on both doors: its own keys, "-bin" keys,
// tracing keys and infergate's control headers alike. What differs is
// only what a hop must write itself:
//
//	:method :scheme :path  the client's (grpc-go writes the same: POST, the
//	                       upstream's scheme, the method)
//	:authority             the upstream's, on both doors
//	grpc-timeout           the time left, on both doors
//	content-type           the client's; served: application/grpc with the
//	                       client's content-subtype, which is the same
//	te                     "trailers", the only value HTTP/2 allows
//	grpc-accept-encoding   the client's names that the proxy can decode too
//	                       (AcceptEncoding); served: grpc-go's list of the
//	                       compressors registered, the same whenever the
//	                       client accepts every one of them (gzip alone in
//	                       infergate). The proxy decodes what it serves, so
//	                       it must not be offered more; a client that
//	                       accepts none of them is offered gzip on the
//	                       served door, where the proxy reads the answer.
//	grpc-encoding          none: only uncompressed calls are forwarded
//	                       ("identity" says no more than none), and the
//	                       served door sends its messages uncompressed
//	user-agent             the client's on the forwarded door. Served:
//	                       grpc-go's own ("grpc-go/1.85.0"), not the
//	                       client's, and this is the one field the doors
//	                       cannot agree on. grpc-go writes user-agent from a
//	                       dial option, once per connection, and drops a
//	                       user-agent key from outgoing metadata (its
//	                       isReservedHeader); the one way around it
//	                       (per-call credentials) adds a second user-agent
//	                       field after grpc-go's, which HTTP does not allow
//	                       for a singleton field and which servers read
//	                       differently (grpc-go keeps both, grpc core the
//	                       last).
//
// Never passed, on either door: the connection-specific fields of HTTP/1
// (connection, keep-alive, proxy-connection, transfer-encoding, upgrade;
// the relay refuses a request with one, as RFC 9113 8.2.2 asks) and host
// (its :authority goes as the upstream's); the status fields (grpc-status,
// grpc-message, grpc-status-details-bin) and grpc-message-type, which
// gRPC reserves and a request has no use for.
//
// infergate's control headers (HeaderTenant, HeaderPriority,
// HeaderRequestID, an affinity header) are the client's metadata: infergate
// reads them and passes them on, as a direct connection would deliver
// them, so a model server or a second proxy can read them too. The headers
// infergate writes itself go where it writes them: HeaderBatchID on a
// merged call upstream (replacing a client's value of the same name), and
// HeaderRoute and HeaderRouteReason on an answer that did not come from
// the client's primary model. A client's x-infergate-* request header is
// its metadata like any other (one proxy behind another reads them).
// Where the doors' calls differ on purpose: a merged call carries the
// keys its callers share and HeaderBatchID (package batcher), and a
// traced call carries the proxy's span as traceparent.
//
// Back, the forwarded door relays the upstream's header fields and
// trailers unchanged. The served door passes the upstream's metadata
// unchanged (ResponseMetadataPasses): the response's :status and
// content-type (with the client's content-subtype) and the status
// trailers are written by the proxy, from the upstream's status when it
// sent one; HeaderRoute and HeaderRouteReason are added to an answer that
// did not come from the client's primary model, HeaderVersion to the
// answer of a call a release split.

// Names of infergate's own headers.
const (
	// HeaderTenant is the default request header naming the caller's
	// tenant (flow control's fair shares).
	HeaderTenant = "x-tenant"
	// HeaderPriority is the default request header naming the call's
	// priority band.
	HeaderPriority = "x-priority"
	// HeaderRequestID is the request header whose value the request log
	// keeps as request_id.
	HeaderRequestID = "x-request-id"
	// HeaderBatchID is the request header of a merged upstream call that
	// names its batch: the batch_id of each caller's request log line.
	HeaderBatchID = "x-infergate-batch-id"
	// HeaderRoute is the response header naming the route that answered
	// when it was not the client's primary model: "fallback",
	// "cascade_edge" or "cascade_escalated".
	HeaderRoute = "x-infergate-route"
	// HeaderRouteReason is the response header saying why another route
	// answered: "breaker_open", "alert", "forced", "slow_start", "retry",
	// "hedge", "shed_in_flight", "shed_deadline", "shed_queue_full",
	// "low_confidence", "confident", "edge_failed", "primary_failed" or
	// "primary_slow".
	HeaderRouteReason = "x-infergate-route-reason"
	// HeaderVersion is the response header of a call of a model with a
	// release that the proxy split: the target that answered, as its
	// version ("2"), its model ("resnet50-trt", or "model:version") or
	// its upstream. The answer's own model_version stays as the server
	// wrote it.
	HeaderVersion = "x-infergate-version"
)

// IsReservedHeader says whether k is one of the headers gRPC keeps for
// itself, never metadata (grpc-go's internal/transport list). grpc-go's
// client and server leave them out of the metadata they write.
func IsReservedHeader(k string) bool {
	if k != "" && k[0] == ':' {
		return true
	}
	switch k {
	case "content-type", "user-agent", "grpc-message-type", "grpc-encoding", "grpc-message",
		"grpc-status", "grpc-timeout", "grpc-status-details-bin", "te":
		return true
	}
	return false
}

// isHopHeader says whether k belongs to one hop and never passes: HTTP/1's
// connection-specific fields and host.
func isHopHeader(k string) bool {
	switch k {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host":
		return true
	}
	return false
}

// ForwardField is what the forwarded door sends upstream for one of the
// client's request header fields: the field as it came, a field with its
// value narrowed (grpc-accept-encoding), or ok false to leave it out. The
// relay writes :authority (the upstream's) and grpc-timeout (the time
// left) itself; ForwardField leaves grpc-timeout out and passes
// :authority.
func ForwardField(f hpack.HeaderField) (_ hpack.HeaderField, ok bool) {
	switch f.Name {
	case ":method", ":scheme", ":path", ":authority", "content-type", "te", "user-agent":
		return f, true
	case "grpc-accept-encoding":
		if f.Value = AcceptEncoding(f.Value); f.Value == "" {
			return f, false
		}
		return f, true
	}
	if IsReservedHeader(f.Name) || isHopHeader(f.Name) {
		return f, false // grpc-timeout, grpc-encoding, the status fields
	}
	return f, true
}

// MetadataPasses says whether the served door sends the client's
// metadata key k upstream: grpc-go's client writes the fields a hop owns
// itself (content-type, user-agent, te, grpc-accept-encoding, :authority;
// see the policy above), so those keys are left out of the outgoing
// metadata, as are the headers that never pass.
func MetadataPasses(k string) bool {
	return k != "grpc-accept-encoding" && !IsReservedHeader(k) && !isHopHeader(k)
}

// ServerMetadataKey says whether a request header field named k is part
// of the call's incoming metadata as grpc-go's server makes it
// (operateHeaders): reserved headers are not, but content-type,
// user-agent and grpc-accept-encoding are; connection makes grpc-go
// refuse the call. The relay builds a served call's metadata with it, so
// the pipeline sees the same metadata whichever side read the call.
func ServerMetadataKey(k string) bool {
	switch k {
	case "content-type", "user-agent", "grpc-accept-encoding":
		return true
	case "connection":
		return false
	}
	return !IsReservedHeader(k)
}

// ResponseMetadataPasses says whether the served door writes the
// upstream's response metadata key k to the client: everything but the
// reserved headers, which the proxy's side writes itself.
func ResponseMetadataPasses(k string) bool { return !IsReservedHeader(k) }

// acceptMemo is AcceptEncoding's last answer: clients send the same list
// on every call, and the forwarded door asks on every call.
var acceptMemo atomic.Pointer[[2]string]

// AcceptEncoding narrows a client's grpc-accept-encoding list to the
// compressors grpc-go decodes here (encoding.GetCompressor; gzip in
// infergate): "" when none is left. The served door's grpc-go client
// offers the upstream exactly those, so the upstream answers a call with
// the same compressions whichever door sent it.
func AcceptEncoding(v string) string {
	if m := acceptMemo.Load(); m != nil && m[0] == v {
		return m[1]
	}
	var b strings.Builder
	for name := range strings.SplitSeq(v, ",") {
		name = strings.TrimSpace(name)
		if name == "" || name == "identity" || encoding.GetCompressor(name) == nil {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
	}
	out := b.String()
	if out == strings.TrimSpace(v) {
		out = v
	}
	acceptMemo.Store(&[2]string{v, out})
	return out
}

// CheckClientHeader refuses a header name a client cannot send as
// metadata of its own (pseudo-headers, grpc-*, reserved, binary), or that
// is no header name; "" passes (none). Affinity, tenant and priority
// headers are checked with it.
func CheckClientHeader(name string) error {
	switch n := strings.ToLower(name); {
	case n == "":
		return nil
	case strings.HasPrefix(n, ":") || strings.HasPrefix(n, "grpc-") || IsReservedHeader(n) || strings.HasSuffix(n, "-bin"):
		return fmt.Errorf("%q is not a header a client sends as its own metadata", name)
	case strings.ContainsFunc(n, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}):
		return fmt.Errorf("%q is not a header name (lower-case letters, digits, - _ .)", name)
	}
	return nil
}
