package alert

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// AlertView is one active alert on the admin API.
type AlertView struct {
	Name        string            `json:"name"`
	Fingerprint string            `json:"fingerprint"`
	State       State             `json:"state"`
	Severity    string            `json:"severity"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	ActiveSince time.Time         `json:"active_since"`
	FiringSince time.Time         `json:"firing_since,omitzero"`
	Value       string            `json:"value,omitempty"`
	Threshold   string            `json:"threshold,omitempty"`
	Evidence    Evidence          `json:"evidence"`
	Muted       string            `json:"muted,omitempty"`
}

// Alerts returns the active (pending and firing) alerts, sorted by name
// and fingerprint.
func (e *Engine) Alerts() []AlertView {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]AlertView, 0, len(e.alerts))
	for _, a := range e.alerts {
		if a.state == StateResolved {
			continue
		}
		out = append(out, AlertView{
			Name: a.rule.Name, Fingerprint: a.fp, State: a.state, Severity: a.labels["severity"],
			Labels: a.labels, Annotations: a.annotations, ActiveSince: a.activeSince, FiringSince: a.firedAt,
			Value: a.value, Threshold: a.threshold, Evidence: a.evidence, Muted: e.muted[a.fp],
		})
	}
	slices.SortFunc(out, func(x, y AlertView) int {
		if c := strings.Compare(x.Name, y.Name); c != 0 {
			return c
		}
		return strings.Compare(x.Fingerprint, y.Fingerprint)
	})
	return out
}

// RuleView is one rule on the admin API.
type RuleView struct {
	RuleConfig `json:",inline"`
	Builtin    bool `json:"builtin"`
	PerGPU     bool `json:"per_gpu"`
	Active     int  `json:"active"`
}

// Rules returns the rules in file order.
func (e *Engine) Rules() []RuleView {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []RuleView
	for _, r := range e.cfg.rules {
		v := RuleView{RuleConfig: r.Config, Builtin: e.cfg.builtin, PerGPU: r.PerGPU}
		for _, a := range e.alerts {
			if a.rule == r && a.state != StateResolved {
				v.Active++
			}
		}
		out = append(out, v)
	}
	return out
}

// Silences returns the silences.
func (e *Engine) Silences() []Silence { return e.silences.all() }

// AddSilence validates and stores a silence, returning its ID.
func (e *Engine) AddSilence(s Silence) (string, error) {
	if err := s.Validate(e.opts.Now()); err != nil {
		return "", err
	}
	id, err := e.silences.add(s)
	if err == nil {
		e.mu.Lock()
		e.persist.dirty = true
		e.mu.Unlock()
	}
	return id, err
}

// errNotFiring: Ack of an alert that is not firing (409 on the API).
var errNotFiring = errors.New("only a firing alert can be acknowledged")

// Ack acknowledges a firing alert: a silence of it until it resolves. A
// second ack of the same alert returns the first one's silence. A pending
// alert cannot be acknowledged: its silence would end at once (it lasts
// while the alert fires), and the alert would page when it fires.
func (e *Engine) Ack(fp, by, comment string) (string, error) {
	e.mu.Lock()
	a := e.alerts[fp]
	var labels map[string]string
	var state State
	if a != nil {
		labels, state = a.labels, a.state
	}
	e.mu.Unlock()
	if a == nil {
		return "", fmt.Errorf("no active alert %q", fp)
	}
	if state != StateFiring {
		return "", fmt.Errorf("alert %q is %s: %w (add a silence for it instead)", fp, state, errNotFiring)
	}
	for _, s := range e.silences.all() {
		if s.UntilResolved == fp {
			return s.ID, nil
		}
	}
	var ms []Matcher
	for _, k := range []string{"alertname", "model", "gpu"} {
		if v, ok := labels[k]; ok {
			ms = append(ms, Matcher{Name: k, Value: v})
		}
	}
	return e.AddSilence(Silence{Matchers: ms, UntilResolved: fp, CreatedBy: by, Comment: comment})
}

// API serves the alert endpoints of the admin listener:
//
//	GET    /api/v1/alerts               active alerts with evidence
//	POST   /api/v1/alerts/{fp}/ack      acknowledge one (token)
//	GET    /api/v1/rules                the rules
//	GET    /api/v1/silences             silences
//	POST   /api/v1/silences             add one (token)
//	DELETE /api/v1/silences/{id}        remove one (token)
//	GET    /api/v1/baselines            per-model baseline, band, history
//
// Token is the bearer token writes need; "" refuses every write with 403
// and says how to configure one.
type API struct {
	Engine *Engine
	Token  string
}

// Register mounts the endpoints on mux.
func (api *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/alerts", func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{"alerts": api.Engine.Alerts()}
		if r := api.Engine.StateReset(); r != nil {
			// The operator should know the alerts and silences shown
			// are not those from before the restart.
			body["state_reset"] = r
		}
		writeJSON(w, http.StatusOK, body)
	})
	mux.HandleFunc("GET /api/v1/rules", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"rules": api.Engine.Rules()})
	})
	mux.HandleFunc("GET /api/v1/silences", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"silences": api.Engine.Silences()})
	})
	mux.HandleFunc("GET /api/v1/baselines", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"baselines": api.Engine.opts.Baselines.Infos()})
	})
	mux.HandleFunc("POST /api/v1/silences", api.write(func(w http.ResponseWriter, r *http.Request) {
		var s Silence
		if !decodeBody(w, r, MaxSilenceBody, &s, false) {
			return
		}
		s.UntilResolved = ""
		id, err := api.Engine.AddSilence(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": id})
	}))
	mux.HandleFunc("DELETE /api/v1/silences/{id}", api.write(func(w http.ResponseWriter, r *http.Request) {
		if !api.Engine.silences.remove(r.PathValue("id")) {
			writeError(w, http.StatusNotFound, "no silence "+r.PathValue("id"))
			return
		}
		api.Engine.mu.Lock()
		api.Engine.persist.dirty = true
		api.Engine.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("id")})
	}))
	mux.HandleFunc("POST /api/v1/alerts/{fp}/ack", api.write(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			CreatedBy string `json:"created_by"`
			Comment   string `json:"comment"`
		}
		if !decodeBody(w, r, maxAckBody, &body, true) {
			return
		}
		id, err := api.Engine.Ack(r.PathValue("fp"), body.CreatedBy, body.Comment)
		if err != nil {
			code := http.StatusNotFound
			if errors.Is(err, errNotFiring) {
				code = http.StatusConflict
			}
			writeError(w, code, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": id})
	}))
}

// Caps of the API's request bodies; a larger one is answered 413 with
// the limit.
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

// Guard guards a state-changing handler with the bearer token, as the
// alert API's own writes are: other admin endpoints use it too.
func (api *API) Guard(h http.HandlerFunc) http.HandlerFunc { return api.write(h) }

// write guards a state-changing handler with the bearer token.
func (api *API) write(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if api.Token == "" {
			writeError(w, http.StatusForbidden, "writes are disabled: start infergate with --admin-token-file FILE (a file holding a secret token) and send Authorization: Bearer <token>")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(api.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="infergate"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
