package report

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Ms formats milliseconds with three significant decimals below 10 ms
// ("0.412", "3.25") and fewer above ("12.4", "1530").
func Ms(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case a < 1:
		return fmt.Sprintf("%.3f", v)
	case a < 10:
		return fmt.Sprintf("%.2f", v)
	case a < 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// SignedMs is Ms with an explicit sign, for differences ("+0.051").
func SignedMs(v float64) string {
	if v >= 0 {
		return "+" + Ms(v)
	}
	return Ms(v)
}

// Rate formats a per-second rate as a whole number ("12345").
func Rate(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

// Ratio formats a ratio with two decimals and a "x" ("0.87x").
func Ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

// Counts formats counts by name, sorted by name ("NotFound=1 Unavailable=3"),
// or "-" when there are none.
func Counts(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
