package alert

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Values that cannot work are refused at config load, each error naming
// the field (all were accepted and failed only at run time).
func TestConfigRefusesValuesThatCannotWork(t *testing.T) {
	errorsRule := func(ratio, rate string) RuleConfig {
		return RuleConfig{Name: "Errs", Condition: Condition{Kind: KindErrors, Ratio: ratio, Rate: rate}}
	}
	thresholdOn := func(metric, value string) RuleConfig {
		return RuleConfig{Name: "T", Condition: Condition{Kind: KindThreshold, Metric: metric, Value: value}}
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"action reboot", Config{Rules: []RuleConfig{func() RuleConfig { r := thresholdRule(); r.Action = "reboot"; return r }()}},
			`rules[0] ("HighP99"): action: "reboot", want fallback`},
		{"error_ratio 200%", Config{Rules: []RuleConfig{thresholdOn("error_ratio", "200%")}},
			`rules[0] ("T"): value: "200%", an error ratio is between 0 and 100%`},
		{"errors ratio 200%", Config{Rules: []RuleConfig{errorsRule("200%", "")}},
			`rules[0] ("Errs"): ratio: "200%"`},
		{"errors rate NaN", Config{Rules: []RuleConfig{errorsRule("", "NaN")}},
			`rules[0] ("Errs"): rate: "NaN"`},
		{"threshold rate NaN", Config{Rules: []RuleConfig{thresholdOn("rate", "NaN")}},
			`rules[0] ("T"): value: "NaN" is not a finite number`},
		{"threshold rate +Inf", Config{Rules: []RuleConfig{thresholdOn("rate", "+Inf")}},
			`rules[0] ("T"): value: "+Inf" is not a finite number`},
		{"gpu NaN", Config{Rules: []RuleConfig{{Name: "G", Condition: Condition{Kind: KindGPU, Field: "utilization", Value: "NaN"}}}},
			`rules[0] ("G"): value: "NaN" is not a finite number`},
		{"baseline above_percent NaN", Config{Rules: []RuleConfig{{Name: "B", Condition: Condition{Kind: KindBaseline, AbovePercent: math.NaN()}}}},
			`rules[0] ("B"): above_percent: NaN`},
		{"repeat_interval 1ns", Config{Route: &RouteConfig{Receiver: "log", RepeatInterval: time.Nanosecond}},
			"route.repeat_interval: 1ns, must be at least 1s"},
		{"child group_interval 1ms", Config{Route: &RouteConfig{Receiver: "log", Routes: []*RouteConfig{{GroupInterval: time.Millisecond}}}},
			"route.routes[0].group_interval: 1ms, must be at least 1s"},
		{"group_wait negative", Config{Route: &RouteConfig{Receiver: "log", GroupWait: -time.Second}},
			"route.group_wait: -1s, must not be negative"},
		{"baseline time_scale NaN", Config{Baseline: BaselineConfig{TimeScale: math.NaN()}},
			"baseline: weeks and time_scale"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
	// What still works: the one action, 100%, 1s, a child's 0 (inherit).
	ok := thresholdRule()
	ok.Action = ActionFallback
	c := Config{Rules: []RuleConfig{ok, thresholdOn("error_ratio", "100%")},
		Route: &RouteConfig{Receiver: "log", RepeatInterval: time.Second, GroupInterval: time.Second, Routes: []*RouteConfig{{Receiver: "log"}}}}
	if err := c.Validate(); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}
