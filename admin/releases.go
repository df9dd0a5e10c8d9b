package admin

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/infergate/infergate/release"
)

// Releases is what /api/v1/releases shows and acts on. cmd/infergate
// plugs in the running release.Set with what it adds: the targets
// checked against the model servers, the log lines, the metrics and the
// state file.
type Releases interface {
	// Status returns every release (release.Set.Status).
	Status() []release.Status
	// Act runs pause, resume, promote or rollback on model's release;
	// reason goes into a rollback's words.
	Act(model, action, reason string) (release.Decision, error)
	// Start starts a release checked as the configuration's are; an
	// error names the field relative to the release
	// ("candidate.version: ...").
	Start(ctx context.Context, spec release.Spec) error
}

// MaxReleaseBody caps the body of POST /api/v1/releases.
const MaxReleaseBody = 64 << 10

// releaseAction is the body of POST /api/v1/releases.
type releaseAction struct {
	Model  string `json:"model"`
	Action string `json:"action"`
	Reason string `json:"reason"`
	// Release is the spec of {"action": "start"}, read as the YAML
	// file's releases: entries are (durations such as "30m" included).
	Release any `json:"release"`
}

// releasesAPI serves
//
//	GET  /api/v1/releases   each release: weights, step, evidence, decisions
//	POST /api/v1/releases   (token) {"model", "action": "pause"|"resume"|
//	                        "promote"|"rollback", "reason"} or
//	                        {"action": "start", "release": {spec}}
//
// A refused write answers 400 {"error", "field"}, the field as the body
// spells it (release.candidate.version); a model without a release 404;
// a release already promoted or rolled back 409.
func (a *Server) releasesAPI(mux *http.ServeMux) {
	rs := a.Releases
	mux.HandleFunc("GET /api/v1/releases", func(w http.ResponseWriter, _ *http.Request) {
		st := rs.Status()
		if st == nil {
			st = []release.Status{} // "no releases" reads as such
		}
		WriteJSON(w, http.StatusOK, map[string]any{"releases": st})
	})
	mux.HandleFunc("POST /api/v1/releases", a.Guard(func(w http.ResponseWriter, r *http.Request) {
		var body releaseAction
		if !decodeBody(w, r, MaxReleaseBody, &body, false) {
			return
		}
		if body.Action == "start" {
			a.startRelease(w, r, rs, body)
			return
		}
		if body.Release != nil {
			writeFieldError(w, http.StatusBadRequest, "release", "only the start action takes a release")
			return
		}
		if body.Model == "" {
			writeFieldError(w, http.StatusBadRequest, "model", "must name the model whose release to "+body.Action)
			return
		}
		d, err := rs.Act(body.Model, body.Action, body.Reason)
		switch {
		case errors.Is(err, release.ErrNoRelease):
			writeFieldError(w, http.StatusNotFound, "model", err.Error())
			return
		case errors.Is(err, release.ErrFinished):
			writeFieldError(w, http.StatusConflict, "model", err.Error())
			return
		case err != nil:
			field, _, _ := strings.Cut(err.Error(), ":")
			writeFieldError(w, http.StatusBadRequest, field, err.Error())
			return
		}
		out := map[string]any{"release": statusOf(rs, body.Model)}
		if d.Model != "" {
			out["decision"] = d
		}
		WriteJSON(w, http.StatusOK, out)
	}))
}

// startRelease answers {"action": "start", "release": {...}}.
func (a *Server) startRelease(w http.ResponseWriter, r *http.Request, rs Releases, body releaseAction) {
	if body.Release == nil {
		writeFieldError(w, http.StatusBadRequest, "release", "start needs the release's spec, as under releases: in the configuration")
		return
	}
	// JSON is YAML: the spec is read as the file's entries are, so
	// "step_time_limit": "30m" means what it means there.
	b, err := yaml.Marshal(body.Release)
	var spec release.Spec
	if err == nil {
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		err = dec.Decode(&spec)
	}
	if err != nil {
		writeFieldError(w, http.StatusBadRequest, "release", "release: "+strings.TrimPrefix(err.Error(), "yaml: "))
		return
	}
	if body.Model != "" && body.Model != spec.Model {
		writeFieldError(w, http.StatusBadRequest, "model", "names "+body.Model+" but the release is of "+spec.Model)
		return
	}
	if err := rs.Start(r.Context(), spec); err != nil {
		field, _, _ := strings.Cut(err.Error(), ":")
		writeFieldError(w, http.StatusBadRequest, "release."+field, "release."+err.Error())
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"release": statusOf(rs, spec.Model)})
}

// statusOf is model's release as the GET shows it; nil when it has none.
func statusOf(rs Releases, model string) *release.Status {
	for _, st := range rs.Status() {
		if st.Spec.Model == model {
			return &st
		}
	}
	return nil
}

// writeFieldError answers {"error", "field"}: what was wrong, and the
// field of the body that was.
func writeFieldError(w http.ResponseWriter, code int, field, msg string) {
	WriteJSON(w, code, map[string]string{"error": msg, "field": field})
}
