package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// faultPlan is the one fault the demo injects: model slowed down by
// slowdown, from at after the load starts, for dur.
type faultPlan struct {
	model    string
	slowdown float64
	at, dur  time.Duration
}

// faulter sets and heals a model's slowdown.
type faulter interface {
	inject(ctx context.Context, model string, slowdown float64) error
	heal(ctx context.Context, model string) error
}

// runFault carries out p: it waits, injects, waits, heals, and announces
// each step. If ctx ends while the fault is active it still heals it (on a
// context of its own), so a run never leaves a model slowed down.
func runFault(ctx context.Context, f faulter, p faultPlan, announce func(string)) {
	t := time.NewTimer(p.at)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	if err := f.inject(ctx, p.model, p.slowdown); err != nil {
		announce(fmt.Sprintf("fault injection failed: %v", err))
		return
	}
	announce(fmt.Sprintf("FAULT: %s slowed down %gx for %s (POST /api/v1/faults): watch its P99 rise",
		p.model, p.slowdown, p.dur))
	t.Reset(p.dur)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := f.heal(hctx, p.model); err != nil {
		announce(fmt.Sprintf("fault heal failed: %v", err))
		return
	}
	announce(fmt.Sprintf("fault healed: %s at normal speed (DELETE /api/v1/faults); P99 falls within 1m",
		p.model))
}

// httpFaults drives simserver's fault API at admin.
type httpFaults struct {
	hc    *http.Client
	admin string
}

func (h httpFaults) inject(ctx context.Context, model string, slowdown float64) error {
	body, err := json.Marshal(map[string]any{"model": model, "slowdown": slowdown})
	if err != nil {
		return fmt.Errorf("demo: fault body: %w", err)
	}
	return h.do(ctx, http.MethodPost, "http://"+h.admin+"/api/v1/faults", body)
}

func (h httpFaults) heal(ctx context.Context, model string) error {
	return h.do(ctx, http.MethodDelete, "http://"+h.admin+"/api/v1/faults?model="+url.QueryEscape(model), nil)
}

func (h httpFaults) do(ctx context.Context, method, u string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("demo: %s %s: %w", method, u, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return fmt.Errorf("demo: %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("demo: %s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
