package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/infergate/infergate/alert"
)

// alertsAPI serves the alert endpoints:
//
//	GET    /api/v1/alerts               active alerts with evidence
//	POST   /api/v1/alerts/{fp}/ack      acknowledge one (token)
//	GET    /api/v1/rules                the rules
//	GET    /api/v1/silences             silences
//	POST   /api/v1/silences             add one (token)
//	DELETE /api/v1/silences/{id}        remove one (token)
//	GET    /api/v1/baselines            per-model baseline, band, history
func (a *Server) alertsAPI(mux *http.ServeMux) {
	e := a.Alerts
	mux.HandleFunc("GET /api/v1/alerts", func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{"alerts": e.Alerts()}
		if r := e.StateReset(); r != nil {
			// The operator should know the alerts and silences shown
			// are not those from before the restart.
			body["state_reset"] = r
		}
		WriteJSON(w, http.StatusOK, body)
	})
	mux.HandleFunc("GET /api/v1/rules", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]any{"rules": e.Rules()})
	})
	mux.HandleFunc("GET /api/v1/silences", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]any{"silences": e.Silences()})
	})
	mux.HandleFunc("GET /api/v1/baselines", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]any{"baselines": e.Baselines()})
	})
	mux.HandleFunc("POST /api/v1/silences", a.Guard(func(w http.ResponseWriter, r *http.Request) {
		var s alert.Silence
		if !decodeBody(w, r, MaxSilenceBody, &s, false) {
			return
		}
		s.UntilResolved = ""
		id, err := e.AddSilence(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		WriteJSON(w, http.StatusOK, map[string]string{"id": id})
	}))
	mux.HandleFunc("DELETE /api/v1/silences/{id}", a.Guard(func(w http.ResponseWriter, r *http.Request) {
		if !e.RemoveSilence(r.PathValue("id")) {
			writeError(w, http.StatusNotFound, "no silence "+r.PathValue("id"))
			return
		}
		WriteJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("id")})
	}))
	mux.HandleFunc("POST /api/v1/alerts/{fp}/ack", a.Guard(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			CreatedBy string `json:"created_by"`
			Comment   string `json:"comment"`
		}
		if !decodeBody(w, r, maxAckBody, &body, true) {
			return
		}
		id, err := e.Ack(r.PathValue("fp"), body.CreatedBy, body.Comment)
		if err != nil {
			code := http.StatusNotFound
			if errors.Is(err, alert.ErrNotFiring) {
				code = http.StatusConflict
			}
			writeError(w, code, err.Error())
			return
		}
		WriteJSON(w, http.StatusOK, map[string]string{"id": id})
	}))
}

// Caps of the request bodies; a larger one is answered 413 with the
// limit.
const (
	MaxSilenceBody = 64 << 10
	maxAckBody     = 16 << 10
)

// decodeBody decodes r's JSON body of at most limit bytes into v, unknown
// fields refused. A larger body is answered 413 naming the limit, bad
// JSON 400; it reports whether v was decoded. With optional an empty
// body is no error (v keeps its zero value).
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, optional bool) bool {
	lr := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(lr)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// What follows the JSON value counts against the cap too.
		_, err = io.Copy(io.Discard, lr)
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil, optional && errors.Is(err, io.EOF):
		return true
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body: larger than the limit of %d bytes (%d KiB)", tooBig.Limit, tooBig.Limit>>10))
	default:
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
	}
	return false
}
