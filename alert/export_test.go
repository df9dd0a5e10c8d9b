package alert

import (
	"strings"
	"testing"
	"time"
)

// An exported annotation's .Threshold is the rule's threshold, not
// Prometheus's $value (the measured value), and so is the bound in its
// .Summary: "p99 %s, over its SLO 250ms" of $value, one per model's SLO.
func TestExportThresholdInAnnotations(t *testing.T) {
	c := &Config{SLO: []SLOConfig{{Model: "resnet50", P99: 250 * time.Millisecond}, {Model: "bert", P99: time.Second}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := ExportPrometheus(c)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, want := range []string{
		`{{(printf "p99 %s, over its SLO 250ms" ($value | humanizeDuration))}}`,
		`{{(printf "p99 %s, over its SLO 1s" ($value | humanizeDuration))}}`,
		`{{(printf "failed calls %s, over its bound 1%%" ($value | humanizePercentage))}}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("export lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "over its SLO {{$value}}") {
		t.Errorf("the SLO is rendered as the measured value:\n%s", out)
	}
}

// A rule's own template keeps .Value as $value and .Threshold as the
// rule's threshold.
func TestExportOwnTemplate(t *testing.T) {
	c := &Config{Rules: []RuleConfig{thresholdRule()}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := ExportPrometheus(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{{$labels.model}} p99 {{$value}} > {{"500ms"}}`; !strings.Contains(string(b), want) {
		t.Errorf("export lacks %s:\n%s", want, b)
	}
}
