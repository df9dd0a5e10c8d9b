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

// A fallback model the upstream's repository does not hold is warned
// about once the index answers (after a failed try); known ones are not.
func TestWarnUnknownFallbacks(t *testing.T) {
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
	warnUnknownFallbacks(context.Background(), "edge", map[string]string{"resnet50": "resnet18", "bert-large": "bert-tiny"}, ask, retry, log)
	out := buf.String()
	if tries != 2 {
		t.Errorf("%d tries, want 2 (one failed, one answered)", tries)
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "route=bert-large fallback=bert-tiny upstream=edge") {
		t.Errorf("no warning for the unknown fallback:\n%s", out)
	}
	if strings.Contains(out, "resnet18") {
		t.Errorf("a warning for a known fallback:\n%s", out)
	}
}

// A server without the index API (TF-Serving) cannot say: no warning, no
// retry.
func TestWarnUnknownFallbacksNoIndex(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	tries := 0
	ask := func(context.Context) (*kservepb.RepositoryIndexResponse, error) {
		tries++
		return nil, status.Error(codes.Unimplemented, "unknown service")
	}
	warnUnknownFallbacks(context.Background(), "tf", map[string]string{"m": "n"}, ask, nil, log)
	if tries != 1 || buf.Len() != 0 {
		t.Errorf("%d tries, log %q", tries, buf.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	warnUnknownFallbacks(ctx, "down", map[string]string{"m": "n"}, func(context.Context) (*kservepb.RepositoryIndexResponse, error) {
		return nil, errors.New("refused")
	}, nil, log)
}
