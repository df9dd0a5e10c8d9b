package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/infergate/infergate/proto/kservepb"
)

var startLine = regexp.MustCompile(`^simserver: grpc=(\S+) admin=(\S+)$`)

// TestRun starts simserver in-process on :0 ports, parses the start line,
// talks to both listeners, then stops it as a signal would.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--seed", "5", "--config", "models.yaml"}, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var grpcAddr, adminAddr string
	for lines.Scan() {
		if m := startLine.FindStringSubmatch(lines.Text()); m != nil {
			grpcAddr, adminAddr = m[1], m[2]
			break
		}
	}
	if grpcAddr == "" {
		t.Fatalf("no start line; run returned %v", <-done)
	}
	go io.Copy(io.Discard, pr) // keep later log lines flowing

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v", hc, err)
	}
	live, err := kservepb.NewGRPCInferenceServiceClient(conn).ServerLive(ctx, &kservepb.ServerLiveRequest{})
	if err != nil || !live.Live {
		t.Fatalf("ServerLive = %v, %v", live, err)
	}
	resp, err := http.Post("http://"+adminAddr+"/api/v1/faults", "application/json", strings.NewReader(`{"model":"resnet50","hang":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST fault = %d", resp.StatusCode)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v, want nil after shutdown", err)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"log level", []string{"--log-level", "loud"}, "simserver: --log-level"},
		{"config", []string{"--config", "missing.yaml"}, "simserver: --config"},
		{"listen", []string{"--listen", "256.0.0.1:1", "--admin", "127.0.0.1:0"}, "simserver: --listen"},
		{"extra args", []string{"serve"}, "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run(%v) = %v, want %q", tc.args, err, tc.want)
			}
		})
	}
}
