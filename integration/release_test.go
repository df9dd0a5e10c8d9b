package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// releaseView is what the test reads of GET /api/v1/releases.
type releaseView struct {
	Spec struct {
		Model string `json:"model"`
	} `json:"spec"`
	State   string  `json:"state"`
	Weight  float64 `json:"weight"`
	Step    int     `json:"step"`
	History []struct {
		Kind   string  `json:"kind"`
		From   float64 `json:"from"`
		Reason string  `json:"reason"`
	} `json:"history"`
	// Evidence is kept raw, for a failure's message.
	Evidence json.RawMessage `json:"evidence"`
}

func releasesOf(t *testing.T, admin string) []releaseView {
	t.Helper()
	code, body := httpGet(t, "http://"+admin+"/api/v1/releases")
	var out struct {
		Releases []releaseView `json:"releases"`
	}
	if err := json.Unmarshal([]byte(body), &out); code != 200 || err != nil {
		t.Fatalf("GET /api/v1/releases: %d %v: %s", code, err, body)
	}
	return out.Releases
}

// TestReleaseRollsBackASlowerCandidate (issue 46's first done-when, with
// real processes): simserver serves resnet50 versions 1 and 2, version 2
// 1.3x slower; infergate releases version 2 at 10% (steps 10, 50, 100)
// under about 100 calls/s. The release is rolled back on the evidence of
// at most a minute of canary traffic (counted in calls, not timed),
// /api/v1/releases shows the decision in words, the webhook gets a
// VersionRegression notification with the ratio, the metrics pass
// promtool, a release naming a version the server lacks is refused with
// its field (the API and --check-config ask the server's repository),
// and a restart resumes the rolled-back release from the state file.
func TestReleaseRollsBackASlowerCandidate(t *testing.T) {
	h := newHook(t)
	sim := startSim(t, "--config", versionedDefaults(t))
	state := filepath.Join(t.TempDir(), "release-state.json")
	release := `  - model: resnet50
    stable: {version: "1"}
    candidate: {version: "%s"}
    steps: [10, 50, 100]
`
	config := func(candidate string) string {
		return writeFile(t, "infergate.yaml", fmt.Sprintf(`
alerting:
  receivers:
    - name: hook
      webhook_configs: [{url: %q}]
  route:
    receiver: hook
    group_wait: 1s
    group_interval: 2s
release_state_file: %q
releases:
`+release, h.srv.URL, state, candidate))
	}
	// --check-config asks the server's repository: version 9 is not there.
	out, err := exec.Command(filepath.Join(binDir, "infergate"), "--upstream", sim.grpc, "--config", config("9"), "--check-config").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), `releases[0].candidate.version: model "resnet50" has no version "9" on the server`) {
		t.Errorf("--check-config with an unknown candidate: %v\n%s\nwant exit 2 naming releases[0].candidate.version", err, out)
	}

	cfg := config("2")
	token := writeFile(t, "token", "s3cret\n")
	gate := startProxy(t, sim.grpc, "--config", cfg, "--admin-token-file", token)
	rs := releasesOf(t, gate.admin)
	if len(rs) != 1 || rs[0].State != "running" || rs[0].Weight != 10 {
		t.Fatalf("at start: %+v; want resnet50 running at 10%%", rs)
	}
	promtoolClean(t, gate.admin, "infergate_release_weight", "infergate_release_step", "infergate_release_state",
		"infergate_release_decisions_total", "infergate_release_info")

	// Started through the API against a version the server lacks:
	// refused, the field named.
	req := `{"action": "start", "release": {"model": "mobilenet_v3", "stable": {"version": "1"}, "candidate": {"version": "4"}, "weight": 5}}`
	code, body := authedPost(t, "http://"+gate.admin+"/api/v1/releases", "s3cret", req)
	if code != 400 || !strings.Contains(body, `"field": "release.candidate.version"`) {
		t.Errorf("start with an unknown version: %d %s; want 400 naming release.candidate.version", code, body)
	}

	fault(t, sim.admin, `{"model":"resnet50","version":"2","slowdown":1.3}`)
	// About 100 calls/s, one every 10 ms. Not ten callers on 100 ms
	// tickers: their calls arrive together, wait behind each other for
	// the model's one slot, and that shared wait (30 ms and more) hides
	// the candidate's 1.5 ms of extra compute: its calls are then truly
	// not 1.3x slower, and nothing should be rolled back.
	l := startLoad(t, gate.grpc, 1, 1, 10*time.Millisecond)
	defer l.stop()

	var rolled releaseView
	for start := time.Now(); ; time.Sleep(500 * time.Millisecond) {
		rs = releasesOf(t, gate.admin)
		if len(rs) == 1 && rs[0].State == "rolled_back" {
			rolled = rs[0]
			break
		}
		if rs[0].State == "promoted" || rs[0].Weight > 10 {
			t.Fatalf("the 1.3x slower candidate was promoted: %+v", rs[0])
		}
		if time.Since(start) > 4*time.Minute {
			t.Fatalf("not rolled back within 4 minutes: %+v\nevidence %s\nload: %v\n%s", rs, rs[0].Evidence, l.failed(), headTail(gate.log.String(), 4<<10, 4<<10))
		}
	}
	last := rolled.History[len(rolled.History)-1]
	if last.Kind != "rollback" || last.From != 10 || !strings.Contains(last.Reason, "rolled back at 10%") {
		t.Fatalf("decision: %+v; want a rollback at 10%%", last)
	}
	ratio := regexp.MustCompile(`version 2's (p\d+) is (\d+\.\d+)x version 1's .*?(\d[\d,]*) candidate and`).FindStringSubmatch(last.Reason)
	if ratio == nil {
		t.Fatalf("the decision does not say the ratio in words: %q", last.Reason)
	}
	if r, _ := strconv.ParseFloat(ratio[2], 64); r < 1.1 {
		t.Errorf("ratio %s, want above 1.1 (the candidate is 1.3x slower): %q", ratio[2], last.Reason)
	}
	// At 10% of 100 calls/s a minute of canary traffic is 600 calls.
	if n, _ := strconv.Atoi(strings.ReplaceAll(ratio[3], ",", "")); n > 600 {
		t.Errorf("rolled back after %d candidate calls, more than a minute's 600: %q", n, last.Reason)
	}
	t.Logf("rollback: %s", last.Reason)

	// The notification, through the ordinary pipeline, carries the words.
	var note string
	for start := time.Now(); note == "" && time.Since(start) < time.Minute; time.Sleep(200 * time.Millisecond) {
		for _, b := range h.got() {
			if s, _ := json.Marshal(b); strings.Contains(string(s), "VersionRegression") {
				note = string(s)
			}
		}
	}
	if !strings.Contains(note, "x version 1's") || !strings.Contains(note, "rolled back at 10%") {
		t.Errorf("webhook: %s; want a VersionRegression notification with the ratio in words", note)
	}
	if body := metricsText(t, gate.admin); !strings.Contains(body, `infergate_release_decisions_total{decision="rollback",model="resnet50"} 1`) ||
		!strings.Contains(body, `infergate_release_state{model="resnet50",state="rolled_back"} 1`) {
		t.Errorf("metrics after the rollback lack the decision and the state")
	}

	// A restart resumes the release as it was: rolled back, its decision kept.
	l.stop()
	if err := gate.sigterm(t); err != nil {
		t.Logf("infergate exited: %v", err)
	}
	again := startProxy(t, sim.grpc, "--config", cfg)
	rs = releasesOf(t, again.admin)
	if len(rs) != 1 || rs[0].State != "rolled_back" || len(rs[0].History) == 0 || rs[0].History[len(rs[0].History)-1].Reason != last.Reason {
		t.Errorf("after a restart: %+v; want the release rolled back with its decision", rs)
	}
}

// authedPost posts a JSON body to an admin URL with the admin token.
func authedPost(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
