package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// A fallback model, or a rule's model, the upstream's repository does not
// hold is warned about once the index answers (after a failed try); known
// ones are not.
func TestWarnUnknownModels(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	tries := 0
	ask := func(context.Context) (*kservepb.RepositoryIndexResponse, error) {
		if tries++; tries == 1 {
			return nil, status.Error(codes.Unavailable, "starting")
		}
		return &kservepb.RepositoryIndexResponse{Models: []*kservepb.RepositoryIndexResponse_ModelIndex{{Name: "resnet18"}, {Name: "bert"}}}, nil
	}
	retry := make(chan time.Time, 1)
	retry <- time.Time{}
	warnUnknownModels(context.Background(), "edge", []modelRef{
		{setting: "routes[resnet50].fallback", model: "resnet18", fallback: true},
		{setting: "routes[bert-large].fallback", model: "bert-tiny", fallback: true},
		{setting: "rules[Slow].select.model", model: "gpt-x"},
		{setting: "slo[bert]", model: "bert"},
	}, ask, retry, log)
	out := buf.String()
	if tries != 2 {
		t.Errorf("%d tries, want 2 (one failed, one answered)", tries)
	}
	if !strings.Contains(out, "calls sent to the fallback will fail\" setting=routes[bert-large].fallback model=bert-tiny upstream=edge") {
		t.Errorf("no warning for the unknown fallback:\n%s", out)
	}
	if !strings.Contains(out, "has no effect until the server loads it\" setting=rules[Slow].select.model model=gpt-x upstream=edge") {
		t.Errorf("no warning for the rule of an unknown model:\n%s", out)
	}
	if strings.Contains(out, "resnet18") || strings.Contains(out, "model=bert ") {
		t.Errorf("a warning for a known model:\n%s", out)
	}
}

// A server without the index API (TF-Serving) cannot say: no warning, no
// retry.
func TestWarnUnknownModelsNoIndex(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	tries := 0
	ask := func(context.Context) (*kservepb.RepositoryIndexResponse, error) {
		tries++
		return nil, status.Error(codes.Unimplemented, "unknown service")
	}
	warnUnknownModels(context.Background(), "tf", []modelRef{{setting: "routes[m].fallback", model: "n", fallback: true}}, ask, nil, log)
	if tries != 1 || buf.Len() != 0 {
		t.Errorf("%d tries, log %q", tries, buf.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	warnUnknownModels(ctx, "down", []modelRef{{setting: "routes[m].fallback", model: "n", fallback: true}}, func(context.Context) (*kservepb.RepositoryIndexResponse, error) {
		return nil, errors.New("refused")
	}, nil, log)
}
