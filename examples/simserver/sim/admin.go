package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// maxFaultBody bounds a fault request body.
const maxFaultBody = 1 << 16

// AdminHandler serves the admin API:
//
//	GET    /healthz                  200 "ok"
//	GET    /metrics                  Prometheus exposition (Triton's names)
//	POST   /api/v1/faults            set (replace) a model's fault; 200 with the fault as stored
//	GET    /api/v1/faults            200 with the active faults (JSON array)
//	DELETE /api/v1/faults[?model=m]  heal model m, or all; 200 with the faults still active
//	GET    /api/v1/requests[?model=m] the last 256 ModelInfer calls' model, id and headers
//
// Errors are JSON {"error": "...", "field": "..."} with 400 (bad body, the
// field named where one is at fault) or 405.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST /api/v1/faults", s.postFault)
	mux.HandleFunc("GET /api/v1/requests", s.getRequests)
	mux.HandleFunc("GET /api/v1/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("DELETE /api/v1/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.ClearFaults(r.URL.Query().Get("model")))
	})
	mux.HandleFunc("/api/v1/faults", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "method not allowed"})
	})
	return mux
}

// apiError is the JSON body of an admin API error.
type apiError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func (s *Server) postFault(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxFaultBody))
	dec.DisallowUnknownFields()
	var f Fault
	if err := dec.Decode(&f); err != nil {
		writeJSON(w, http.StatusBadRequest, decodeError(err))
		return
	}
	if dec.More() {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "body must hold one JSON object"})
		return
	}
	stored, err := s.SetFault(f)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			writeJSON(w, http.StatusBadRequest, apiError{Error: fe.Error(), Field: fe.Field})
			return
		}
		writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, stored)
}

// decodeError names the field a JSON decoding error is about, where the
// decoder tells.
func decodeError(err error) apiError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return apiError{
			Error: fmt.Sprintf("sim: fault: %s: must be %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value),
			Field: typeErr.Field,
		}
	}
	// encoding/json reports unknown fields only as text:
	// json: unknown field "name".
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		field := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return apiError{Error: fmt.Sprintf("sim: fault: %s: unknown field", field), Field: field}
	}
	return apiError{Error: "sim: fault: invalid JSON body: " + err.Error()}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
