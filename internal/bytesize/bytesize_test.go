package bytesize

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for s, want := range map[string]int64{
		"67108864": 64 << 20, "64MiB": 64 << 20, "64 MiB": 64 << 20, "64mib": 64 << 20, "1GiB": 1 << 30,
		"512KiB": 512 << 10, "1.5GiB": 3 << 29, "10MB": 10e6, "0": 0, "7B": 7, "4M": 4 << 20,
	} {
		if got, err := Parse(s); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "MiB", "64XB", "-1MiB", "1e9", "64 Mi B"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
	if Format(64<<20) != "64MiB" || Format(1000) != "1000" || Format(0) != "0" {
		t.Error("Format")
	}
}

func TestRewriteYAML(t *testing.T) {
	src := "max_message_bytes: 16MiB   # the largest message\nfront_door: {max_buffered_bytes: \"64MiB\", max_connections: 10}\nmonitor:\n  max_label_bytes: 128\nname: 5MiB\n"
	got, err := RewriteYAML([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := "max_message_bytes: 16777216   # the largest message\nfront_door: {max_buffered_bytes: 67108864, max_connections: 10}\nmonitor:\n  max_label_bytes: 128\nname: 5MiB\n"
	if string(got) != want {
		t.Errorf("RewriteYAML:\n%s\nwant\n%s", got, want)
	}
	if _, err := RewriteYAML([]byte("a: 1\nfront_door:\n  max_buffered_bytes: 64XB\n")); err == nil || !strings.Contains(err.Error(), "line 3: max_buffered_bytes") {
		t.Errorf("a bad unit: %v, want the line and the key named", err)
	}
}
