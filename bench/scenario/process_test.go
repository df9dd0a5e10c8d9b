package scenario

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFreeAddr(t *testing.T) {
	a, err := FreeAddr()
	if err != nil || !strings.HasPrefix(a, "127.0.0.1:") || strings.HasSuffix(a, ":0") {
		t.Errorf("FreeAddr() = %q, %v", a, err)
	}
}

func TestOverheadValidateMissingBinary(t *testing.T) {
	cfg := OverheadConfig{Simserver: filepath.Join(t.TempDir(), "nope")}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "overhead: simserver") || !strings.Contains(err.Error(), "binary not found") {
		t.Errorf("Validate() = %v", err)
	}
	if cfg.Model != "identity_fp32" || cfg.Input != "INPUT0" || len(cfg.Payloads) != 2 || !slices.Equal(cfg.Conns, []int{2}) {
		t.Errorf("defaults not filled: %+v", cfg)
	}
}
