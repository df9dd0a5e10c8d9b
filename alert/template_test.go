package alert

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"text/template"
	"time"
)

// hostileTemplate would write 10^10 x's if nothing stopped it.
const hostileTemplate = "{{range 100000}}{{range 100000}}x{{end}}{{end}}"

// unchecked compiles text as parseTemplates does but skips checkTemplate,
// as if the static check had missed it, with extra functions for tests.
func unchecked(t *testing.T, text string, funcs template.FuncMap) *annotation {
	t.Helper()
	tm, err := template.New("a").Option("missingkey=zero").Funcs(templateFuncs).Funcs(funcs).Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return &annotation{text: text, tmpl: tm}
}

func TestTemplateCheckRefusesCostlyTemplates(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{hostileTemplate, "steps"},
		{"{{range 20000}}{{end}}", "steps"},
		{"{{range .Labels}}{{range .Labels}}{{range .Labels}}x{{end}}{{end}}{{end}}", "steps"},
		{`{{define "a"}}{{template "a"}}{{end}}{{template "a"}}`, "calls itself"},
		{`{{define "a"}}{{template "b"}}{{end}}{{define "b"}}{{template "a"}}{{end}}{{template "a"}}`, "calls itself"},
		{`{{printf "%0999999999d" 1}}`, "width above"},
		{`{{printf "%.5000f" 1.0}}`, "precision above"},
		{`{{printf "%*d" 100000000 1}}`, "(*)"},
		{`{{.Value | printf "%099999d"}}`, "width above"},
	} {
		_, err := parseTemplates(map[string]string{"summary": tc.text})
		if err == nil || !strings.Contains(err.Error(), "annotations.summary: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want annotations.summary and %q", tc.text, err, tc.want)
		}
	}
	for _, ok := range []string{
		"{{.Labels.model}} p99 {{.Value}} > {{.Threshold}}",
		"{{range $k, $v := .Labels}}{{$k}}={{$v}} {{end}}",
		`{{printf "%.2f%%" 12.5}} {{range 10}}-{{end}}`,
		`{{define "m"}}{{.Labels.model}}{{end}}{{template "m" .}} and {{template "m" .}}`,
	} {
		if _, err := parseTemplates(map[string]string{"summary": ok}); err != nil {
			t.Errorf("%s: refused: %v", ok, err)
		}
	}
}

// The check runs with the config's: a rule with the hostile template is
// refused, naming the rule and the annotation.
func TestConfigRefusesHostileTemplate(t *testing.T) {
	rc := thresholdRule()
	rc.Annotations = map[string]string{"description": hostileTemplate}
	c := &Config{Rules: []RuleConfig{rc}}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `rules[0] ("HighP99"): annotations.description: template does about`) {
		t.Fatalf("Validate = %v", err)
	}
}

func TestRenderCapsOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		an := unchecked(t, hostileTemplate, nil)
		out := an.render(templateData{})
		if !strings.HasPrefix(out, "xxx") || !strings.HasSuffix(out, "(cut: annotation longer than 64 KiB)") {
			t.Fatalf("render = %.40q…%q", out, out[max(len(out)-60, 0):])
		}
		if n := strings.Count(out, "x"); n != MaxAnnotationBytes {
			t.Errorf("%d x's, want the cap %d", n, MaxAnnotationBytes)
		}
	})
}

// A printf format from data (a client picks model names) is bounded when
// it runs.
func TestRenderBoundsPrintfFromData(t *testing.T) {
	an, err := parseTemplates(map[string]string{"s": "{{printf .Labels.model 1}}"})
	if err != nil {
		t.Fatal(err)
	}
	out := an["s"].render(templateData{Labels: map[string]string{"model": "%0999999999d"}})
	if !strings.HasPrefix(out, "(template error: ") || !strings.Contains(out, "width above 1024") || !strings.HasSuffix(out, "{{printf .Labels.model 1}}") {
		t.Fatalf("render = %q", out)
	}
}

// A template that runs past RenderTimeout without writing is abandoned:
// render returns its raw text, the template is not executed again, and
// the abandoned render's count is freed when it ends.
func TestRenderTimesOutAndAbandons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int32
		an := unchecked(t, "{{slow}}after", template.FuncMap{"slow": func() string { calls.Add(1); <-release; return "late" }})
		start := time.Now()
		out := an.render(templateData{})
		if want := "(template error: it ran past 1s and was stopped) {{slow}}after"; out != want {
			t.Fatalf("render = %q, want %q", out, want)
		}
		if took := time.Since(start); took != RenderTimeout {
			t.Errorf("render took %v, want RenderTimeout", took)
		}
		if got := abandoned.Load(); got != 1 {
			t.Errorf("abandoned = %d, want 1", got)
		}
		out = an.render(templateData{})
		if calls.Load() != 1 || !strings.Contains(out, "no longer executed") {
			t.Errorf("second render: %d calls, %q", calls.Load(), out)
		}
		close(release)
		synctest.Wait()
		if got := abandoned.Load(); got != 0 {
			t.Errorf("abandoned after the render ended = %d, want 0", got)
		}
	})
}

// Past maxAbandoned renders still running, templates are not executed.
func TestRenderAbandonedBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		for range maxAbandoned {
			unchecked(t, "{{slow}}", template.FuncMap{"slow": func() string { <-release; return "" }}).render(templateData{})
		}
		var ran atomic.Bool
		out := unchecked(t, "{{run}}", template.FuncMap{"run": func() string { ran.Store(true); return "" }}).render(templateData{})
		if ran.Load() || !strings.Contains(out, "slow templates are still running") {
			t.Errorf("with %d abandoned: ran=%v, %q", maxAbandoned, ran.Load(), out)
		}
		close(release)
		synctest.Wait()
	})
}

// The hostile template reaching the engine (as if unchecked) neither
// stops evaluation nor grows without bound: the alert fires with a capped
// annotation and the next evaluations go on.
func TestEngineSurvivesHostileTemplate(t *testing.T) {
	rc := thresholdRule()
	rc.For = 0
	cfg := &Config{Rules: []RuleConfig{rc}, Route: &RouteConfig{Receiver: "log", GroupWait: time.Second}}
	r := newRig(t, cfg)
	cfg.rules[0].ann["summary"] = unchecked(t, hostileTemplate, nil)
	r.src.set("resnet50", calls(6000, ms(100), ms(800), nil))
	r.run(5 * time.Second)
	if s := r.state("HighP99", "resnet50"); s != StateFiring {
		t.Fatalf("state %q, want firing", s)
	}
	got := r.e.Alerts()[0].Annotations["summary"]
	if len(got) > MaxAnnotationBytes+64 || !strings.HasSuffix(got, "KiB)") {
		t.Fatalf("annotation of %d bytes ending %q", len(got), got[max(len(got)-40, 0):])
	}
}
