package main

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/infergate/infergate/monitor/correlate"
)

// CostConfig prices GPU time and energy (docs/cost.md). Optional: without
// it, /api/v1/cost reports GPU-seconds and joules only.
type CostConfig struct {
	// GPUHour is the price of an hour of a GPU by its product name, as
	// the GPU source reports it (/api/v1/gpus "name").
	GPUHour map[string]float64 `yaml:"gpu_hour"`
	// KWh is the price of a kilowatt-hour.
	KWh float64 `yaml:"kwh"`
	// Currency names the unit of both; default USD.
	Currency string `yaml:"currency"`
}

// Problems names each bad field.
func (c CostConfig) Problems() []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.GPUHour)) {
		if v := c.GPUHour[name]; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("gpu_hour[%q]: must be a price of 0 or more, got %v", name, v))
		}
	}
	if c.KWh < 0 || math.IsNaN(c.KWh) || math.IsInf(c.KWh, 0) {
		errs = append(errs, fmt.Errorf("kwh: must be a price of 0 or more, got %v", c.KWh))
	}
	return errs
}

// prices turns the configuration into the attributor's prices.
func (c CostConfig) prices() correlate.Prices {
	cur := c.Currency
	if cur == "" {
		cur = "USD"
	}
	return correlate.Prices{GPUHour: maps.Clone(c.GPUHour), KWh: c.KWh, Currency: cur}
}
