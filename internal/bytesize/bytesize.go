// Package bytesize reads byte sizes as people write them: plain bytes
// ("67108864"), or a number with a unit, binary (KiB, MiB, GiB, TiB) or
// decimal (KB, MB, GB, TB), case-insensitive ("64MiB", "1.5 GiB",
// "512kib"). Flags and YAML values that are sizes in bytes accept both.
package bytesize

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var units = map[string]float64{
	"b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

var sizeRE = regexp.MustCompile(`^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$`)

// Parse reads a size in bytes. A plain negative number passes, for the
// setting's own check to refuse with its reasons.
func Parse(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size: want bytes, or a number with a unit such as 64MiB, 512KiB, 1GiB", s)
	}
	if m[2] == "" {
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number of bytes", s)
		}
		return n, nil
	}
	if strings.HasPrefix(m[1], "-") {
		return 0, fmt.Errorf("%q is not a size: a size with a unit is positive", s)
	}
	mult, ok := units[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (want B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB)", s, m[2])
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	v := math.Round(f * mult)
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v), nil
}

// Format writes n as the largest binary unit that divides it ("64MiB"),
// or in bytes.
func Format(n int64) string {
	for _, u := range []struct {
		name string
		v    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.v == 0 {
			return strconv.FormatInt(n/u.v, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// yamlSize matches a YAML line's "*_bytes: VALUE" where VALUE has a unit.
var yamlSize = regexp.MustCompile(`(\b[a-z0-9_]+_bytes\s*:\s*)(["']?)([0-9]+(?:\.[0-9]+)?\s*[A-Za-z]+)(["']?)`)

// RewriteYAML turns the sizes with units of keys ending in "_bytes" into
// plain bytes, so that a YAML file decodes them into integer fields. Each
// line keeps its place, so the decoder's line numbers stay the file's. A
// size that does not parse is an error naming its line and key.
func RewriteYAML(src []byte) ([]byte, error) {
	lines := strings.Split(string(src), "\n")
	changed := false
	var errs []string
	for i, line := range lines {
		if !strings.Contains(line, "_bytes") {
			continue
		}
		code, comment := line, ""
		if j := strings.Index(line, " #"); j >= 0 {
			code, comment = line[:j], line[j:]
		}
		out := yamlSize.ReplaceAllStringFunc(code, func(m string) string {
			g := yamlSize.FindStringSubmatch(m)
			n, err := Parse(g[3])
			if err != nil {
				key := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(g[1]), ":"))
				errs = append(errs, fmt.Sprintf("line %d: %s: %v", i+1, key, err))
				return m
			}
			return g[1] + strconv.FormatInt(n, 10)
		})
		if out != code {
			lines[i], changed = out+comment, true
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if !changed {
		return src, nil
	}
	return []byte(strings.Join(lines, "\n")), nil
}
