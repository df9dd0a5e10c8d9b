package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/proto/methods"
)

func TestBatchingFromYAML(t *testing.T) {
	c, err := parseConfig([]string{"--config", "testdata/config.batching.good.yaml", "--batch-queue-size", "99"})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Batching.Config().Models
	want := map[string]batcher.Policy{
		"resnet50": {Mode: batcher.Adaptive, MaxSize: 64, MaxDelay: time.Millisecond, QueueSize: 99,
			SLO: 50 * time.Millisecond, Slots: 1},
		"mobilenet_v3": {Mode: batcher.Static, MaxSize: 32, PreferredSizes: []int{8, 16}, MaxDelay: 500 * time.Microsecond,
			QueueSize: 99, SLO: 50 * time.Millisecond, Slots: 4},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("policies\n got %+v\nwant %+v", got, want)
	}
}

func TestBatchingFromFlags(t *testing.T) {
	c, err := parseConfig([]string{"--upstream", "a:1", "--batching", "static", "--batch-models", "resnet50, mobilenet_v3",
		"--batch-max-size", "16", "--batch-preferred-sizes", "8,4", "--batch-max-delay", "2ms", "--batch-slots", "2", "--batch-slo", "30ms"})
	if err != nil {
		t.Fatal(err)
	}
	p := batcher.Policy{Mode: batcher.Static, MaxSize: 16, PreferredSizes: []int{4, 8}, MaxDelay: 2 * time.Millisecond,
		QueueSize: batcher.DefaultQueueSize, SLO: 30 * time.Millisecond, Slots: 2}
	want := map[string]batcher.Policy{"resnet50": p, "mobilenet_v3": p}
	if got := c.Batching.Config().Models; !reflect.DeepEqual(got, want) {
		t.Errorf("policies\n got %+v\nwant %+v", got, want)
	}
}

// TestBatchingShed: --batch-shed turns shedding on for every model; a
// model's own shed: false in the YAML file keeps it off for that model.
func TestBatchingShed(t *testing.T) {
	c, err := parseConfig([]string{"--upstream", "a:1", "--batching", "adaptive", "--batch-models", "resnet50", "--batch-shed"})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Batching.Config().Models["resnet50"]; !p.Shed {
		t.Errorf("--batch-shed: policy %+v, want Shed", p)
	}
	off := false
	c.Batching.Models["resnet50"] = batcher.ModelSettings{Shed: &off}
	if p := c.Batching.Config().Models["resnet50"]; p.Shed {
		t.Errorf("model shed: false: policy %+v, want no Shed", p)
	}
	c, err = parseConfig([]string{"--upstream", "a:1", "--batching", "adaptive", "--batch-models", "resnet50"})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Batching.Config().Models["resnet50"]; p.Shed {
		t.Errorf("default: policy %+v, want no Shed", p)
	}
}

func TestBatchingOff(t *testing.T) {
	for _, args := range [][]string{
		{"--upstream", "a:1"},
		{"--config", "testdata/config.batching.good.yaml", "--batching", "off"},
	} {
		c, err := parseConfig(args)
		if err != nil {
			t.Fatal(err)
		}
		// Built, so that a reload can turn batching on, but batching
		// nothing.
		b, err := newBatcher(c.Batching, nil)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if len(b.Policies()) != 0 || b.Handles(methods.ModelInfer, "resnet50") || batchingOn(c.Batching) {
			t.Errorf("%q: batches %v; want nothing", args, b.Policies())
		}
		b.Close()
	}
}

func TestBatchingErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"model max size 0", []string{"--config", "testdata/config.batching.bad-max-size.yaml"},
			"config: batching.models.resnet50.max_size: must be between 1 and 4096, got 0"},
		{"no models", []string{"--upstream", "a:1", "--batching", "adaptive"},
			"config: batching.models: required when batching is on: name the batchable models with --batch-models or batching.models"},
		{"bad mode", []string{"--upstream", "a:1", "--batching", "dynamic", "--batch-models", "m"},
			`config: batching.mode: must be off, static or adaptive, got "dynamic"`},
		{"preferred over max", []string{"--upstream", "a:1", "--batching", "static", "--batch-models", "m", "--batch-preferred-sizes", "64"},
			"config: batching.preferred_sizes: each must be between 1 and max_size 32, got 64"},
		{"zero slots flag", []string{"--upstream", "a:1", "--batch-slots", "0"},
			"config: --batch-slots: must be between 1 and 1024, got 0"},
		{"bad preferred list", []string{"--upstream", "a:1", "--batch-preferred-sizes", "8,x"},
			`config: --batch-preferred-sizes: "8,x" is not a list of sizes`},
		{"negative slo", []string{"--upstream", "a:1", "--batch-slo", "-1s"},
			"config: batching.slo: must be positive, got -1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
