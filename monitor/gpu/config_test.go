package gpu

import (
	"strings"
	"testing"
	"time"
)

func TestConfigResolvedAndProblems(t *testing.T) {
	c := DefaultConfig()
	c.Sources = []SourceConfig{{Kind: "Prometheus", URL: "http://a/metrics"}, {Kind: "prometheus", URL: "http://b/metrics", Interval: 5 * time.Second}, {Kind: "nvml"}}
	r := c.Resolved()
	want := []SourceConfig{
		{Kind: KindPrometheus, Name: "prometheus", URL: "http://a/metrics", Interval: DefaultInterval},
		{Kind: KindPrometheus, Name: "prometheus_2", URL: "http://b/metrics", Interval: 5 * time.Second},
		{Kind: KindNVML, Name: "nvml", Interval: DefaultInterval},
	}
	for i := range want {
		if r.Sources[i] != want[i] {
			t.Errorf("sources[%d] = %+v, want %+v", i, r.Sources[i], want[i])
		}
	}
	if c.Sources[0].Name != "" {
		t.Error("Resolved changed its receiver's sources")
	}
	if errs := c.Problems(); len(errs) != 0 {
		t.Errorf("problems of a good config: %v", errs)
	}
	if n := len(c.Samplers(nil)); n != 3 {
		t.Errorf("%d samplers, want 3", n)
	}

	c.Interval = 0
	c.Sources = append(c.Sources, SourceConfig{Kind: "dcgm"}, SourceConfig{Kind: "nvml", Name: "prometheus"})
	var got []string
	for _, err := range c.Problems() {
		got = append(got, err.Error())
	}
	wantErrs := []string{
		"interval: must be positive, got 0s",
		`sources[3].kind: must be nvml or prometheus, got "dcgm"`,
		`sources[4].name: duplicate source name "prometheus"`,
	}
	if strings.Join(got, "\n") != strings.Join(wantErrs, "\n") {
		t.Errorf("problems\n got %q\nwant %q", got, wantErrs)
	}
}
