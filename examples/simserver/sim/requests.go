package sim

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc/metadata"
)

// The request headers simserver received, for a test or a person checking
// what a proxy passes on (GET /api/v1/requests): the last recentRequests
// ModelInfer calls, oldest first, each with its model, request id and
// metadata (gRPC's own keys left out).

// recentRequests bounds the record: it is a window, not a log.
const recentRequests = 256

// RequestRecord is one received ModelInfer call.
type RequestRecord struct {
	Model   string              `json:"model"`
	ID      string              `json:"id,omitempty"`
	Headers map[string][]string `json:"headers"`
}

// requestLog is a ring of the last recentRequests records.
type requestLog struct {
	mu   sync.Mutex
	ring []RequestRecord
	next int
}

func (l *requestLog) note(ctx context.Context, model, id string) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := make(map[string][]string, len(md))
	for k, v := range md {
		if k == "content-type" || k == "user-agent" || strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") {
			continue
		}
		h[k] = v
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := RequestRecord{Model: model, ID: id, Headers: h}
	if len(l.ring) < recentRequests {
		l.ring = append(l.ring, r)
		return
	}
	l.ring[l.next] = r
	l.next = (l.next + 1) % recentRequests
}

// Requests returns the recorded requests, oldest first.
func (l *requestLog) all() []RequestRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]RequestRecord, 0, len(l.ring))
	out = append(out, l.ring[l.next:]...)
	return append(out, l.ring[:l.next]...)
}

// getRequests is GET /api/v1/requests[?model=m].
func (s *Server) getRequests(w http.ResponseWriter, r *http.Request) {
	model := r.URL.Query().Get("model")
	out := []RequestRecord{}
	for _, rec := range s.requests.all() {
		if model == "" || rec.Model == model {
			out = append(out, rec)
		}
	}
	for _, rec := range out {
		for _, v := range rec.Headers {
			sort.Strings(v)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
