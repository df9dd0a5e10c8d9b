package sim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFaultsAPIRoundTrip(t *testing.T) {
	h := start(t, Config{})
	url := h.admin + "/api/v1/faults"

	code, body := do(t, "POST", url, `{"model": "resnet50", "slowdown": 1.5, "error_rate": 0.1, "error_code": "unavailable", "delay_ms": 50}`)
	if code != 200 {
		t.Fatalf("POST = %d %s", code, body)
	}
	var got Fault
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := Fault{Model: "resnet50", Slowdown: 1.5, ErrorRate: 0.1, ErrorCode: "UNAVAILABLE", DelayMS: 50}
	if got != want {
		t.Errorf("POST reply = %+v, want %+v", got, want)
	}
	// Defaults filled; "" means all models.
	if code, body = do(t, "POST", url, `{"hang": true}`); code != 200 || !strings.Contains(body, `"model": "*"`) || !strings.Contains(body, `"error_code": "INTERNAL"`) {
		t.Fatalf("POST all = %d %s", code, body)
	}
	// A second POST for a model replaces its fault.
	if code, body = do(t, "POST", url, `{"model": "resnet50", "slowdown": 2}`); code != 200 {
		t.Fatalf("POST replace = %d %s", code, body)
	}

	var list []Fault
	code, body = do(t, "GET", url, "")
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("GET = %d %s %v", code, body, err)
	}
	if len(list) != 2 || list[0].Model != "*" || list[1].Model != "resnet50" || list[1].Slowdown != 2 || list[1].ErrorRate != 0 {
		t.Fatalf("GET = %+v", list)
	}

	code, body = do(t, "DELETE", url+"?model=resnet50", "")
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list) != 1 || list[0].Model != "*" {
		t.Fatalf("DELETE one = %d %s", code, body)
	}
	code, body = do(t, "DELETE", url, "")
	if code != 200 || strings.TrimSpace(body) != "[]" {
		t.Fatalf("DELETE all = %d %s", code, body)
	}
	if len(h.srv.Faults()) != 0 {
		t.Errorf("faults left: %v", h.srv.Faults())
	}
	if code, _ := do(t, "PUT", url, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT = %d", code)
	}
	if code, body := do(t, "GET", h.admin+"/healthz", ""); code != 200 {
		t.Errorf("healthz = %d %s", code, body)
	}
}

func TestFaultsAPIBadBody(t *testing.T) {
	h := start(t, Config{})
	cases := []struct {
		name, body, field string
	}{
		{"wrong type", `{"model": "resnet50", "error_rate": "high"}`, "error_rate"},
		{"unknown field", `{"model": "resnet50", "slow": 2}`, "slow"},
		{"rate above 1", `{"model": "resnet50", "error_rate": 1.5}`, "error_rate"},
		{"negative slowdown", `{"slowdown": -1}`, "slowdown"},
		{"negative delay", `{"delay_ms": -5}`, "delay_ms"},
		{"unknown code", `{"error_code": "BROKEN"}`, "error_code"},
		{"OK code", `{"error_code": "ok"}`, "error_code"},
		{"unknown model", `{"model": "gpt"}`, "model"},
		{"unknown throttle", `{"throttle": "cold"}`, "throttle"},
		{"not JSON", `{model: 1`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, "POST", h.admin+"/api/v1/faults", tc.body)
			if code != http.StatusBadRequest {
				t.Fatalf("status = %d %s", code, body)
			}
			var e apiError
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if e.Field != tc.field || e.Error == "" || (tc.field != "" && !strings.Contains(e.Error, tc.field)) {
				t.Errorf("error = %+v, want field %q", e, tc.field)
			}
		})
	}
	if len(h.srv.Faults()) != 0 {
		t.Errorf("a bad body set a fault: %v", h.srv.Faults())
	}
}

func TestFaultErrorRate(t *testing.T) {
	h := start(t, Config{})
	if _, err := h.srv.SetFault(Fault{Model: "resnet50", ErrorRate: 1, ErrorCode: "resource_exhausted"}); err != nil {
		t.Fatal(err)
	}
	_, err := h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 1, seq(64, 0, 1)))
	wantCode(t, err, codes.ResourceExhausted, "injected RESOURCE_EXHAUSTED fault for model 'resnet50'")
	_, err = h.tf.Predict(context.Background(), classifierTF("resnet50", 1, seq(64, 0, 1)))
	wantCode(t, err, codes.ResourceExhausted, "")
	// Other models are untouched; the all-models fault defaults to INTERNAL.
	if _, err := h.ks.ModelInfer(context.Background(), classifierKServe("mobilenet_v3", 1, seq(64, 0, 1))); err != nil {
		t.Fatalf("mobilenet_v3: %v", err)
	}
	if _, err := h.srv.SetFault(Fault{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = h.ks.ModelInfer(context.Background(), classifierKServe("mobilenet_v3", 1, seq(64, 0, 1)))
	wantCode(t, err, codes.Internal, "")
	// A model's own fault wins over the all-models fault.
	_, err = h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 1, seq(64, 0, 1)))
	wantCode(t, err, codes.ResourceExhausted, "")
	h.srv.ClearFaults("")
	if _, err := h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 1, seq(64, 0, 1))); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	if got := h.srv.models["resnet50"].stats.failures[1].Load(); got != 3 {
		t.Errorf("BACKEND failures = %d, want 3", got)
	}
}

func TestFaultErrorRateFraction(t *testing.T) {
	h := start(t, Config{Seed: 3})
	if _, err := h.srv.SetFault(Fault{Model: "identity_fp32", ErrorRate: 0.3}); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for range 400 {
		if _, err := h.ks.ModelInfer(context.Background(), identityRequest(seq(2, 0, 1))); err != nil {
			failed++
		}
	}
	// 30% of 400 is 120; six standard deviations (≈55) either side.
	if failed < 65 || failed > 175 {
		t.Errorf("%d of 400 failed at error_rate 0.3", failed)
	}
}

// TestFaultHang runs in-process under synctest: a hung request returns when
// its context ends (deadline or cancel) and counts as cancelled, and Close
// releases hung requests.
func TestFaultHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := New(Config{SampleInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.SetFault(Fault{Model: "resnet50", Hang: true}); err != nil {
			t.Fatal(err)
		}
		ks := &kserveService{s: srv}
		req := classifierKServe("resnet50", 1, seq(64, 0, 1))

		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		begin := time.Now()
		_, err = ks.ModelInfer(ctx, req)
		cancel()
		wantCode(t, err, codes.DeadlineExceeded, "")
		if waited := time.Since(begin); waited != 3*time.Second {
			t.Errorf("hang returned after %v, want the 3s deadline", waited)
		}

		ctx, cancel = context.WithCancel(t.Context())
		errc := make(chan error)
		go func() {
			_, err := ks.ModelInfer(ctx, req)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		wantCode(t, <-errc, codes.Canceled, "")
		if got := srv.Cancelled("resnet50"); got != 2 {
			t.Errorf("Cancelled = %d, want 2", got)
		}

		go func() {
			_, err := ks.ModelInfer(t.Context(), req)
			errc <- err
		}()
		synctest.Wait()
		srv.Close()
		wantCode(t, <-errc, codes.Unavailable, "shutting down")
	})
}

func TestFaultDropConnections(t *testing.T) {
	h := start(t, Config{})
	if _, err := h.ks.ModelInfer(context.Background(), identityRequest(seq(2, 0, 1))); err != nil {
		t.Fatal(err)
	}
	if n := h.srv.conns.count(); n != 1 {
		t.Fatalf("tracked conns = %d, want 1", n)
	}
	if _, err := h.srv.SetFault(Fault{Model: "resnet50", DropConnections: true}); err != nil {
		t.Fatal(err)
	}
	_, err := h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 1, seq(64, 0, 1)))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("dropped call: %v, want UNAVAILABLE", err)
	}
	<-h.handled // the identity call
	<-h.handled // the dropped call
	if n := h.srv.conns.count(); n != 0 {
		t.Errorf("tracked conns after drop = %d, want 0", n)
	}
	// The client reconnects; other models work.
	if _, err := h.ks.ModelInfer(context.Background(), identityRequest(seq(2, 0, 1))); err != nil {
		t.Fatalf("after drop: %v", err)
	}
}
