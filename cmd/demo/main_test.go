package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-seconds", "25", "-rate-scale", "0.5", "-no-fault", "-v"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.seconds != 25 || o.rateScale != 0.5 || !o.noFault || !o.verbose || o.interval != 2*time.Second || o.maxInflight != 256 {
		t.Errorf("options %+v", o)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-seconds", "-1"}, "demo: -seconds: must be >= 0, got -1"},
		{[]string{"-rate-scale", "-2"}, "demo: -rate-scale: must be >= 0, got -2"},
		{[]string{"-interval", "0s"}, "demo: -interval: must be > 0, got 0s"},
		{[]string{"-max-inflight", "0"}, "demo: -max-inflight: must be >= 1, got 0"},
		{[]string{"extra"}, "demo: unexpected arguments: [extra]"},
	}
	for _, tc := range cases {
		if _, err := parseFlags(tc.args, io.Discard); err == nil || err.Error() != tc.want {
			t.Errorf("parseFlags(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestStreamsTextFaultPlan(t *testing.T) {
	cases := []struct {
		o    options
		want string
	}{
		{options{seconds: 0, maxInflight: 256},
			"fault: at 45s the demo slows resnet50 down 1.6x in simserver; it heals it at 1m0s\n" +
				"       watch resnet50's P99 and UP P99 rise while OVH stays small: the slowness is upstream;\n" +
				"       its latency alert sends it to its fallback mobilenet_v3 (a ROUTE line, rows\n"},
		{options{seconds: 65, maxInflight: 256}, "it heals it at 1m0s\n"},
		{options{seconds: 70, maxInflight: 256}, "the route goes back by about 100s: this run may end first; -seconds 100 shows it all"},
		{options{seconds: 55, maxInflight: 256}, "it heals it when the demo ends at 55s\n"},
		{options{seconds: 10, maxInflight: 256}, "fault: off (runs shorter than 50s)"},
		{options{seconds: 60, noFault: true, maxInflight: 256}, "fault: off (-no-fault)"},
	}
	for _, tc := range cases {
		if got := streamsText(nil, tc.o); !strings.Contains(got, tc.want) {
			t.Errorf("streamsText(%+v) = %q, want %q", tc.o, got, tc.want)
		}
	}
	if got := streamsText(nil, options{seconds: storySeconds, maxInflight: 256}); strings.Contains(got, "may end first") {
		t.Errorf("a run of %ds is said to end early: %q", storySeconds, got)
	}
}

func TestEventLog(t *testing.T) {
	var e eventLog
	e.add("a")
	e.add("b")
	if got := e.unseen(); strings.Join(got, ",") != "a,b" {
		t.Errorf("unseen %q", got)
	}
	e.add("c")
	if got := e.unseen(); strings.Join(got, ",") != "c" {
		t.Errorf("unseen %q", got)
	}
	if got := e.last(2); strings.Join(got, ",") != "b,c" {
		t.Errorf("last %q", got)
	}
}
