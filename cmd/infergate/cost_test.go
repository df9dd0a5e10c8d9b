package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCostConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"cost: {kwh: -0.1}\n", "config: cost.kwh: must be a price of 0 or more, got -0.1"},
		{"cost: {gpu_hour: {A100: -2}}\n", `config: cost.gpu_hour["A100"]: must be a price of 0 or more, got -2`},
		{"cost: {gpu_hour: {NVIDIA H100 80GB HBM3: -2}}\n", `gpu_hour["NVIDIA H100 80GB HBM3"]: must be a price of 0 or more`},
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := parseConfig([]string{"--upstream", "a:1", "--config", path})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("cost: {gpu_hour: {A100: 2.5}, kwh: 0.12, currency: EUR}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := parseConfig([]string{"--upstream", "a:1", "--config", path})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Cost.prices(); p.GPUHour["A100"] != 2.5 || p.KWh != 0.12 || p.Currency != "EUR" {
		t.Errorf("prices = %+v", p)
	}
}
