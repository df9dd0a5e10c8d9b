package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/internal/memlimit"
	"github.com/infergate/infergate/proxy"
)

func TestBufferBudget(t *testing.T) {
	cases := []struct {
		name       string
		configured int64
		fromFlag   bool
		limit      int64
		want       int64
		source     string
	}{
		{"no limit", 0, false, 0, proxy.DefaultMaxBufferedBytes, "default"},
		{"a quarter of the limit", 0, false, 1 << 30, 256 << 20, "container_limit/4"},
		{"not below 32 MiB", 0, false, 64 << 20, 32 << 20, "container_limit/4"},
		{"a big container", 0, false, 64 << 30, 16 << 30, "container_limit/4"},
		{"the file's value", 100 << 20, false, 1 << 30, 100 << 20, "config"},
		{"the flag's value", 64 << 20, true, 0, 64 << 20, "flag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultFrontDoor()
			c.MaxBufferedBytes, c.fromFlag = tc.configured, tc.fromFlag
			got, source := bufferBudget(c, tc.limit)
			if got != tc.want || source != tc.source {
				t.Errorf("bufferBudget = %d (%s), want %d (%s)", got, source, tc.want, tc.source)
			}
		})
	}
}

func TestFrontDoorFromFlagsAndFile(t *testing.T) {
	c, err := parseConfig([]string{"--upstream", "a:1"})
	if err != nil {
		t.Fatal(err)
	}
	fd, source := c.FrontDoor.frontDoor(memlimit.Result{Limit: 2 << 30, Source: memlimit.CgroupV2})
	want := proxy.FrontDoor{MaxBufferedBytes: 512 << 20, MaxConcurrentStreams: proxy.DefaultMaxConcurrentStreams, IdleTimeout: proxy.DefaultIdleTimeout}
	if fd != want || source != "container_limit/4" {
		t.Errorf("defaults: %+v (%s), want %+v (container_limit/4)", fd, source, want)
	}

	file := writeYAML(t, "upstream: a:1", "front_door:", "  max_buffered_bytes: 100000000", "  max_concurrent_streams: 64",
		"  max_connections: 500", "  idle_timeout: 90s")
	c, err = parseConfig([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	fd, source = c.FrontDoor.frontDoor(memlimit.Result{Source: memlimit.None})
	want = proxy.FrontDoor{MaxBufferedBytes: 100000000, MaxConcurrentStreams: 64, MaxConnections: 500, IdleTimeout: 90 * time.Second}
	if fd != want || source != "config" {
		t.Errorf("file: %+v (%s), want %+v (config)", fd, source, want)
	}

	c, err = parseConfig([]string{"--config", file, "--max-buffered-bytes", "67108864", "--max-concurrent-streams", "100",
		"--max-connections", "0", "--idle-timeout", "-1s"})
	if err != nil {
		t.Fatal(err)
	}
	fd, source = c.FrontDoor.frontDoor(memlimit.Result{Source: memlimit.None})
	want = proxy.FrontDoor{MaxBufferedBytes: 64 << 20, MaxConcurrentStreams: 100, IdleTimeout: -time.Second}
	if fd != want || source != "flag" {
		t.Errorf("flags win: %+v (%s), want %+v (flag)", fd, source, want)
	}
}

func TestFrontDoorErrorsNameTheField(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--max-buffered-bytes", "-1"}, "config: front_door.max_buffered_bytes: must be 0 (auto) or positive, got -1"},
		{[]string{"--max-buffered-bytes", "64XB"}, `invalid value "64XB" for flag -max-buffered-bytes: "64XB": unknown unit "XB"`},
		{[]string{"--max-concurrent-streams", "0"}, "config: --max-concurrent-streams: must be between 1 and 4294967295, got 0"},
		{[]string{"--max-concurrent-streams", "4294967296"}, "config: front_door.max_concurrent_streams: must be between 1 and 4294967295, got 4294967296"},
		{[]string{"--max-connections", "-2"}, "config: front_door.max_connections: must be 0 (no cap) or positive, got -2"},
	}
	for _, tc := range cases {
		_, err := parseConfig(append([]string{"--upstream", "a:1"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
	file := writeYAML(t, "upstream: a:1", "front_door:", "  max_concurent_streams: 10")
	if _, err := parseConfig([]string{"--config", file}); err == nil || !strings.Contains(err.Error(), `unknown field "max_concurent_streams" in section front_door`) {
		t.Errorf("a misspelt key: %v", err)
	}
}

func TestBudgetWarnings(t *testing.T) {
	var b strings.Builder
	log := slog.New(slog.NewTextHandler(&b, nil))
	mem := memlimit.Result{Limit: 1 << 30, Source: memlimit.CgroupV2}
	budgetWarnings(256<<20, "container_limit/4", mem, log)
	budgetWarnings(64<<20, "flag", memlimit.Result{Source: memlimit.None}, log)
	if b.Len() != 0 {
		t.Errorf("warned of a budget that fits: %s", b.String())
	}
	budgetWarnings(600<<20, "flag", mem, log)
	if !strings.Contains(b.String(), "more than half the container's memory limit") {
		t.Errorf("no warning of a budget above half the limit: %q", b.String())
	}
}
