package scenario

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// BatchMode is infergate's --batching value.
type BatchMode string

// The batching modes infergate accepts.
const (
	BatchOff      BatchMode = "off"
	BatchStatic   BatchMode = "static"
	BatchAdaptive BatchMode = "adaptive"
)

// Roles of the configurations the batching scenario reports.
const (
	RoleOff      = "off"
	RoleBest     = "best static"
	RoleTriton   = "Triton default"
	RoleLatency  = "latency-heavy"
	RoleStatic   = "static"
	RoleAdaptive = "adaptive"
)

// BatchSetting is one infergate batching configuration under test; it
// becomes infergate's --batch-* flags.
type BatchSetting struct {
	// Name labels the configuration in tables and plots ("static 32/2ms").
	Name string
	// Role says why it is in the report (RoleBest, RoleTriton, ...).
	Role string
	Mode BatchMode
	// MaxSize is --batch-max-size; zero leaves the flag out.
	MaxSize int
	// MaxDelay is --batch-max-delay for static batching; zero is passed as
	// "0s", a batch dispatched as soon as the model is free (Triton's
	// dynamic_batching {} default).
	MaxDelay time.Duration
	// PreferredSizes is --batch-preferred-sizes; nil leaves it out.
	PreferredSizes []int
	// QueueSize is --batch-queue-size; zero leaves it out.
	QueueSize int
	// SLO is --batch-slo for adaptive batching; zero leaves it out.
	SLO time.Duration
	// Slots is --batch-slots; zero leaves it out.
	Slots int
	// Shed is --batch-shed for adaptive batching: requests that cannot be
	// answered within the SLO get RESOURCE_EXHAUSTED.
	Shed bool
}

// OffSetting is batching off, the unbatched baseline.
func OffSetting() BatchSetting {
	return BatchSetting{Name: "off", Role: RoleOff, Mode: BatchOff}
}

// StaticSetting is static batching up to size requests, waiting at most
// delay for a batch to fill.
func StaticSetting(size int, delay time.Duration) BatchSetting {
	return BatchSetting{
		Name: fmt.Sprintf("static %d/%s", size, formatDelay(delay)), Role: RoleStatic,
		Mode: BatchStatic, MaxSize: size, MaxDelay: delay,
	}
}

// AdaptiveSetting is adaptive batching that keeps p99 within slo with
// batches of at most maxSize, shedding what cannot meet slo when shed is
// set.
func AdaptiveSetting(slo time.Duration, maxSize int, shed bool) BatchSetting {
	return BatchSetting{Name: "adaptive", Role: RoleAdaptive, Mode: BatchAdaptive, MaxSize: maxSize, SLO: slo, Shed: shed}
}

// Args returns infergate's batching flags for the setting, for model.
func (s BatchSetting) Args(model string) []string {
	args := []string{"--batching", string(s.Mode)}
	if s.Mode == BatchOff {
		return args
	}
	args = append(args, "--batch-models", model)
	if s.MaxSize > 0 {
		args = append(args, "--batch-max-size", strconv.Itoa(s.MaxSize))
	}
	if len(s.PreferredSizes) > 0 {
		parts := make([]string, len(s.PreferredSizes))
		for i, n := range s.PreferredSizes {
			parts[i] = strconv.Itoa(n)
		}
		args = append(args, "--batch-preferred-sizes", strings.Join(parts, ","))
	}
	if s.Mode == BatchStatic {
		args = append(args, "--batch-max-delay", s.MaxDelay.String())
	}
	if s.QueueSize > 0 {
		args = append(args, "--batch-queue-size", strconv.Itoa(s.QueueSize))
	}
	if s.SLO > 0 {
		args = append(args, "--batch-slo", s.SLO.String())
	}
	if s.Slots > 0 {
		args = append(args, "--batch-slots", strconv.Itoa(s.Slots))
	}
	if s.Shed {
		args = append(args, "--batch-shed")
	}
	return args
}

// sameStatic reports whether a and b batch the same way.
func sameStatic(a, b BatchSetting) bool {
	return a.Mode == b.Mode && a.MaxSize == b.MaxSize && a.MaxDelay == b.MaxDelay
}

// MarshalJSON writes durations as strings ("2ms").
func (s BatchSetting) MarshalJSON() ([]byte, error) {
	type out struct {
		Name           string `json:"name"`
		Role           string `json:"role"`
		Mode           string `json:"mode"`
		MaxSize        int    `json:"max_size,omitempty"`
		MaxDelay       string `json:"max_delay,omitempty"`
		PreferredSizes []int  `json:"preferred_sizes,omitempty"`
		QueueSize      int    `json:"queue_size,omitempty"`
		SLO            string `json:"slo,omitempty"`
		Slots          int    `json:"slots,omitempty"`
		Shed           bool   `json:"shed,omitempty"`
	}
	o := out{Name: s.Name, Role: s.Role, Mode: string(s.Mode), MaxSize: s.MaxSize,
		PreferredSizes: s.PreferredSizes, QueueSize: s.QueueSize, Slots: s.Slots, Shed: s.Shed}
	if s.Mode == BatchStatic {
		o.MaxDelay = s.MaxDelay.String()
	}
	if s.SLO > 0 {
		o.SLO = s.SLO.String()
	}
	return json.Marshal(o)
}

// ParseStatic reads static configurations written "64:2ms,32:5ms,16:1ms"
// (max size, colon, max delay).
func ParseStatic(spec string) ([]BatchSetting, error) {
	var out []BatchSetting
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		sizeStr, delayStr, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("scenario: static %q: want SIZE:DELAY, e.g. 32:2ms", item)
		}
		size, err := strconv.Atoi(strings.TrimSpace(sizeStr))
		if err != nil || size < 1 {
			return nil, fmt.Errorf("scenario: static %q: size must be a positive integer", item)
		}
		delay, err := time.ParseDuration(strings.TrimSpace(delayStr))
		if err != nil || delay < 0 {
			return nil, fmt.Errorf("scenario: static %q: delay must be a duration >= 0 (e.g. 2ms)", item)
		}
		out = append(out, StaticSetting(size, delay))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("scenario: static %q: no configuration", spec)
	}
	return out, nil
}

// ParseDurations reads a comma-separated list of durations ("1ms,2ms").
func ParseDurations(spec string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(spec, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("scenario: duration %q: want a duration >= 0 such as 2ms", f)
		}
		out = append(out, d)
	}
	return out, nil
}

// ParseFloats reads a comma-separated list of positive numbers ("0.1,1,8").
func ParseFloats(spec string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(spec, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("scenario: number %q: want a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseInts reads a comma-separated list of positive integers ("8,16").
func ParseInts(spec string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(spec, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("scenario: integer %q: want a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// formatDelay writes a delay compactly: "0", "500µs", "2ms".
func formatDelay(d time.Duration) string {
	if d == 0 {
		return "0ms"
	}
	return d.String()
}
