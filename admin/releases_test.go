package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/release"
)

// setReleases is Releases over a release.Set, as cmd/infergate plugs it
// in, without the model servers.
type setReleases struct {
	set   *release.Set
	specs []release.Spec
}

func (s *setReleases) Status() []release.Status { return s.set.Status() }

func (s *setReleases) Act(model, action, reason string) (release.Decision, error) {
	switch action {
	case "pause":
		return release.Decision{}, s.set.Pause(model)
	case "resume":
		return release.Decision{}, s.set.Resume(model)
	case "promote":
		return s.set.Promote(model)
	case "rollback":
		return s.set.Rollback(model, reason)
	}
	return release.Decision{}, fmt.Errorf("action: must be start, pause, resume, promote or rollback, got %q", action)
}

func (s *setReleases) Start(_ context.Context, spec release.Spec) error {
	if errs := release.Problems(append(s.specs, spec), release.Lookup{}); len(errs) > 0 {
		return errors.New(strings.TrimPrefix(errs[0].Error(), fmt.Sprintf("releases[%d].", len(s.specs))))
	}
	s.specs = append(s.specs, spec)
	return s.set.Apply(s.specs)
}

func releasesServer(t *testing.T) (*Server, *setReleases) {
	t.Helper()
	specs := []release.Spec{{Model: "resnet50", Stable: release.Target{Version: "1"}, Candidate: release.Target{Version: "2"}, Steps: []float64{10, 50, 100}}}
	set, err := release.New(specs)
	if err != nil {
		t.Fatal(err)
	}
	rs := &setReleases{set: set, specs: specs}
	return &Server{Gatherer: prometheus.NewRegistry(), Token: "t", Releases: rs}, rs
}

// /api/v1/releases shows each release's weights, step, evidence and
// decisions; its writes need the token, act on one release, and refuse
// bad input with the field named ({"error", "field"}).
func TestReleasesAPI(t *testing.T) {
	a, _ := releasesServer(t)
	h := a.Handler()
	do := func(method, body, token string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(method, "/api/v1/releases", strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, body, err, rec.Body)
		}
		return rec.Code, out
	}
	code, out := do("GET", "", "")
	rels, _ := out["releases"].([]any)
	if code != 200 || len(rels) != 1 {
		t.Fatalf("GET: %d %v", code, out)
	}
	r0 := rels[0].(map[string]any)
	for _, k := range []string{"weight", "step", "evidence", "history", "state", "spec"} {
		if _, ok := r0[k]; !ok {
			t.Errorf("GET: a release lacks %q: %v", k, r0)
		}
	}
	if r0["weight"] != 10.0 || r0["state"] != "running" {
		t.Errorf("GET: weight %v state %v, want 10 running", r0["weight"], r0["state"])
	}

	for _, c := range []struct {
		body, token string
		code        int
		field, want string
	}{
		{`{"model": "resnet50", "action": "pause"}`, "", 401, "", "bearer token"},
		{`{"model": "resnet50", "action": "pause"}`, "wrong", 401, "", "bearer token"},
		{`{"model": "resnet50", "action": "jump"}`, "t", 400, "action", `got "jump"`},
		{`{"action": "pause"}`, "t", 400, "model", "must name the model"},
		{`{"model": "bert", "action": "pause"}`, "t", 404, "model", "no release"},
		{`{"model": "resnet50", "action": "pause", "colour": "red"}`, "t", 400, "", `unknown field "colour"`},
		{`{"action": "start"}`, "t", 400, "release", "needs the release's spec"},
		{`{"action": "start", "release": {"model": "bert", "stable": {"version": "1"}, "candidate": {"version": "2"}, "steps": [50, 10]}}`, "t", 400, "release.steps", "not increasing (10 after 50)"},
		{`{"action": "start", "release": {"model": "bert", "stable": {"version": "1"}, "candidate": {"version": "2"}, "weight": 5, "colour": 1}}`, "t", 400, "release", "colour"},
		{`{"action": "start", "release": {"model": "bert", "stable": {"version": "1"}, "candidate": {"version": "2"}, "weight": 150}}`, "t", 400, "release.weight", "between 0 and 100"},
	} {
		code, out := do("POST", c.body, c.token)
		msg, _ := out["error"].(string)
		if code != c.code || !strings.Contains(msg, c.want) || (c.field != "" && out["field"] != c.field) {
			t.Errorf("POST %s: %d %v; want %d, field %q, error with %q", c.body, code, out, c.code, c.field, c.want)
		}
	}

	code, out = do("POST", `{"model": "resnet50", "action": "pause"}`, "t")
	if rel, _ := out["release"].(map[string]any); code != 200 || rel["state"] != "paused" {
		t.Errorf("pause: %d %v; want 200 and the release paused", code, out)
	}
	code, out = do("POST", `{"model": "resnet50", "action": "rollback", "reason": "p99 doubled"}`, "t")
	d, _ := out["decision"].(map[string]any)
	if code != 200 || d["kind"] != "rollback" || !strings.Contains(d["reason"].(string), "p99 doubled") {
		t.Errorf("rollback: %d %v; want 200 with the rollback decision and its reason", code, out)
	}
	if code, out = do("POST", `{"model": "resnet50", "action": "promote"}`, "t"); code != 409 || out["field"] != "model" {
		t.Errorf("promote after a rollback: %d %v; want 409", code, out)
	}

	// A start reads the spec as the file does: durations in words.
	code, out = do("POST", `{"action": "start", "release": {"model": "bert", "stable": {"version": "1"}, "candidate": {"version": "2"}, "weight": 5, "judgement": {"step_time_limit": "30m"}}}`, "t")
	rel, _ := out["release"].(map[string]any)
	if code != 200 || rel == nil || rel["weight"] != 5.0 {
		t.Fatalf("start: %d %v", code, out)
	}
	j := rel["spec"].(map[string]any)["judgement"].(map[string]any)
	if j["step_time_limit"] != float64(30*time.Minute) {
		t.Errorf("start: step_time_limit %v, want 30m", j["step_time_limit"])
	}
}
