package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReferencePagesMatchBinary regenerates the reference pages in memory
// and compares them with the committed ones: a flag, a YAML key or a
// metric added without `make docs` fails here.
func TestReferencePagesMatchBinary(t *testing.T) {
	for _, p := range referencePages {
		t.Run(p.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := p.write(&b); err != nil {
				t.Fatalf("generating docs/reference/%s: %v", p.file, err)
			}
			committed, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference", p.file))
			if err != nil {
				t.Fatalf("docs/reference/%s: %v: run make docs", p.file, err)
			}
			if !bytes.Equal(committed, b.Bytes()) {
				t.Errorf("docs/reference/%s is stale: run make docs\n%s", p.file, lineDiff(string(committed), b.String()))
			}
		})
	}
}

// lineDiff lists the lines only the committed page has (-) and those only
// the binary's has (+); the pages are tables of unique rows, so that is
// the change.
func lineDiff(committed, generated string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	inC, inG := count(committed), count(generated)
	var out []string
	for _, l := range strings.Split(committed, "\n") {
		if inG[l] > 0 {
			inG[l]--
			continue
		}
		out = append(out, "- "+l)
	}
	for _, l := range strings.Split(generated, "\n") {
		if inC[l] > 0 {
			inC[l]--
			continue
		}
		out = append(out, "+ "+l)
	}
	if len(out) > 40 {
		out = append(out[:40], fmt.Sprintf("... and %d more lines", len(out)-40))
	}
	return strings.Join(out, "\n")
}

// TestFlagsPageHasHelpDefaults checks the page against -help's own text:
// every flag -help prints is on the page with the default -help shows.
func TestFlagsPageHasHelpDefaults(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_SAMPLER", "OTEL_SERVICE_NAME", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	var path string
	var errs []error
	c := defaultConfig()
	fs := newFlagSet(&c, &path, &errs)
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	var page bytes.Buffer
	if err := flagsPage(&page); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(page.String(), "\n") {
		if name, ok := strings.CutPrefix(l, "| `--"); ok {
			name, _, _ = strings.Cut(name, "`")
			rows[name] = l
		}
	}
	n := 0
	for _, l := range strings.Split(help.String(), "\n") {
		// -help's flag lines: "  -name type" and, further down, "(default X)".
		if !strings.HasPrefix(l, "  -") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(l, "  -"), " ")
		n++
		row, ok := rows[name]
		if !ok {
			t.Errorf("-help shows -%s; the page does not", name)
			continue
		}
		if def := fs.Lookup(name).DefValue; !strings.Contains(row, "`"+def+"`") && def != "" {
			t.Errorf("-%s: -help's default %q is not in the page's row %s", name, def, row)
		}
	}
	if n != len(rows) || n < len(flags) {
		t.Errorf("-help shows %d flags, the page %d, the table has %d", n, len(rows), len(flags))
	}
}

// TestFlagsPageRefusesUnknownKey: a flag row naming a YAML key the file
// does not have fails the page rather than sending users to it.
func TestFlagsPageRefusesUnknownKey(t *testing.T) {
	saved := flags
	t.Cleanup(func() { flags = saved })
	flags = append(slices.Clip(flags), flagRow{"dummy", "front_door.no_such_key", "a typo", to(func(c *Config) *int { return &c.MaxInFlight })})
	err := flagsPage(&bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--dummy") || !strings.Contains(err.Error(), "front_door.no_such_key") {
		t.Fatalf("got %v, want an error naming --dummy and its key", err)
	}
}

// TestParseDesc reads back what client_golang's Desc.String shows for a
// help text with quotes, commas and braces and for constant labels.
func TestParseDesc(t *testing.T) {
	help := `calls, by "reason": {a=b} and, more`
	d := prometheus.NewDesc("infergate_x_total", help, []string{"model", "code"},
		prometheus.Labels{"reason": `max "in", flight`, "path": "served"})
	name, gotHelp, consts, vars, err := parseDesc(d.String())
	if err != nil {
		t.Fatal(err)
	}
	if name != "infergate_x_total" || gotHelp != help {
		t.Errorf("name %q help %q", name, gotHelp)
	}
	if !slices.Equal(vars, []string{"model", "code"}) {
		t.Errorf("variable labels %q", vars)
	}
	want := [][2]string{{"path", "served"}, {"reason", `max "in", flight`}}
	if !slices.Equal(consts, want) {
		t.Errorf("constant labels %q, want %q", consts, want)
	}
	if _, _, _, _, err := parseDesc("Desc{name: x}"); err == nil {
		t.Error("an unknown format parsed")
	}
}

func TestMetricProblems(t *testing.T) {
	for _, tc := range []struct {
		m    metricDoc
		want string // "" for none
	}{
		{metricDoc{name: "infergate_calls_total", typ: "counter", help: "h", labels: []string{"model"}}, ""},
		{metricDoc{name: "infergate_calls", typ: "counter", help: "h"}, "end in _total"},
		{metricDoc{name: "infergate_queue_total", typ: "gauge", help: "h"}, "end in _total"},
		{metricDoc{name: "calls_total", typ: "counter", help: "h"}, "infergate_ prefix"},
		{metricDoc{name: "infergate_latency_milliseconds", typ: "gauge", help: "h"}, "base unit"},
		{metricDoc{name: "infergate_up", typ: "gauge"}, "no help"},
		{metricDoc{name: "infergate_up", typ: "gauge", help: "h", labels: []string{"Model"}}, "snake_case"},
	} {
		errs := metricProblems(tc.m)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", tc.m.name, errs)
		case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want) || !strings.Contains(errs[0].Error(), tc.m.name)):
			t.Errorf("%s: got %v, want an error naming it and saying %q", tc.m.name, errs, tc.want)
		}
	}
}

// TestDocsCommand: `infergate docs --out DIR` writes what the pages are,
// and a wrong page name is a usage error.
func TestDocsCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := docsCommand([]string{"--out", dir}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var page bytes.Buffer
	if code := docsCommand([]string{"flags"}, &page, &errOut); code != 0 {
		t.Fatalf("docs flags: exit %d: %s", code, errOut.String())
	}
	written, err := os.ReadFile(filepath.Join(dir, "flags.md"))
	if err != nil || !bytes.Equal(written, page.Bytes()) {
		t.Errorf("--out's flags.md differs from `docs flags` (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "metrics.md")); err != nil {
		t.Error(err)
	}
	errOut.Reset()
	if code := docsCommand([]string{"flagz"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `"flagz"`) {
		t.Errorf("docs flagz: exit %d, %q; want 2 naming the page", code, errOut.String())
	}
}
