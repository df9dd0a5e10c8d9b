package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeFaults records what runFault did and when (fake time since start).
type fakeFaults struct {
	start     time.Time
	injectErr error
	mu        sync.Mutex
	ops       []string
}

func (f *fakeFaults) log(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, fmt.Sprintf("%s@%s", op, time.Since(f.start)))
}

func (f *fakeFaults) inject(_ context.Context, model string, slowdown float64) error {
	if f.injectErr != nil {
		return f.injectErr
	}
	f.log(fmt.Sprintf("inject %s %g", model, slowdown))
	return nil
}

func (f *fakeFaults) heal(_ context.Context, model string) error {
	f.log("heal " + model)
	return nil
}

func TestRunFault(t *testing.T) {
	plan := faultPlan{model: "resnet50", slowdown: 2.5, at: 15 * time.Second, dur: 15 * time.Second}
	cases := []struct {
		name      string
		stopAfter time.Duration
		injectErr error
		ops       []string
		announced []string
	}{
		{"runs its course", time.Minute, nil,
			[]string{"inject resnet50 2.5@15s", "heal resnet50@30s"},
			[]string{"FAULT: resnet50 slowed down 2.5x for 15s", "fault healed: resnet50"}},
		{"stop while active still heals", 20 * time.Second, nil,
			[]string{"inject resnet50 2.5@15s", "heal resnet50@20s"},
			[]string{"FAULT: resnet50", "fault healed: resnet50"}},
		{"stop before it starts", 10 * time.Second, nil, nil, nil},
		{"injection fails", time.Minute, errors.New("400 Bad Request"), nil,
			[]string{"fault injection failed: 400 Bad Request"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeFaults{start: time.Now(), injectErr: tc.injectErr}
				ctx, cancel := context.WithTimeout(context.Background(), tc.stopAfter)
				defer cancel()
				var announced []string
				runFault(ctx, f, plan, func(s string) { announced = append(announced, s) })
				if strings.Join(f.ops, "|") != strings.Join(tc.ops, "|") {
					t.Errorf("ops %q, want %q", f.ops, tc.ops)
				}
				if len(announced) != len(tc.announced) {
					t.Fatalf("announced %q, want prefixes %q", announced, tc.announced)
				}
				for i, a := range announced {
					if !strings.HasPrefix(a, tc.announced[i]) {
						t.Errorf("announcement %d %q, want prefix %q", i, a, tc.announced[i])
					}
				}
			})
		})
	}
}

func TestHTTPFaults(t *testing.T) {
	var mu sync.Mutex
	var reqs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, fmt.Sprintf("%s %s %s", r.Method, r.URL.RequestURI(), body))
		mu.Unlock()
		if strings.Contains(string(body), "bad") {
			http.Error(w, `{"error":"sim: fault: model: unknown model \"bad\""}`, http.StatusBadRequest)
			return
		}
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	h := httpFaults{hc: srv.Client(), admin: strings.TrimPrefix(srv.URL, "http://")}
	ctx := context.Background()
	if err := h.inject(ctx, "resnet50", 2.5); err != nil {
		t.Fatal(err)
	}
	if err := h.heal(ctx, "resnet50"); err != nil {
		t.Fatal(err)
	}
	err := h.inject(ctx, "bad", 2)
	if err == nil || !strings.Contains(err.Error(), "400 Bad Request") || !strings.Contains(err.Error(), "unknown model") {
		t.Errorf("bad fault: %v", err)
	}
	want := []string{
		`POST /api/v1/faults {"model":"resnet50","slowdown":2.5}`,
		`DELETE /api/v1/faults?model=resnet50 `,
	}
	for i, w := range want {
		if reqs[i] != w {
			t.Errorf("request %d = %q, want %q", i, reqs[i], w)
		}
	}
}
