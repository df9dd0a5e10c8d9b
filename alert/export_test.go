package alert

import (
	"strings"
	"testing"
	"time"
)

// An exported annotation's .Threshold is the rule's threshold, not
// Prometheus's $value (the measured value): "p99 {{$value}} over its SLO
// {{"250ms"}}", one per model's SLO.
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
		`p99 {{$value}} over its SLO {{"250ms"}}`,
		`p99 {{$value}} over its SLO {{"1s"}}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("export lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "over its SLO {{$value}}") {
		t.Errorf("the SLO is rendered as the measured value:\n%s", out)
	}
}
