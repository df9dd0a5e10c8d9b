package admin

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/infergate/infergate/monitor"
)

// versionWindow is the window the version comparison reads: a canary
// takes a share of a model's calls, and a p99 interval needs a few hundred
// calls per version, so the 5m window says more than the correlator's few
// seconds.
const versionWindow = monitor.Window5m

// versionQuantile is the quantile the comparison puts side by side.
const versionQuantile = 0.99

// versionsDoc is the version comparison of one model in /api/v1/models:
// each version's latency over Window, and the newest version (the
// canary) against the one with the most calls among the others (the
// baseline).
type versionsDoc struct {
	Window string `json:"window"`
	// Versions are newest first (numeric versions by value, then others
	// by name).
	Versions   []versionDoc      `json:"versions"`
	Comparison versionCompareDoc `json:"comparison"`
}

// versionDoc is one version's successful inference calls in the window.
type versionDoc struct {
	Version string  `json:"version"`
	Calls   uint64  `json:"calls"`
	P50     float64 `json:"p50_seconds"`
	P99     float64 `json:"p99_seconds"`
}

// versionCompareDoc is the canary's p99 over the baseline's.
type versionCompareDoc struct {
	Version         string  `json:"version"`
	BaselineVersion string  `json:"baseline_version"`
	Quantile        float64 `json:"quantile"`
	// Ratio is the canary's p99 over the baseline's; RatioLower and
	// RatioUpper bound the true ratio with probability ConfidenceLevel
	// (null with too few calls).
	Ratio           *float64 `json:"ratio"`
	RatioLower      *float64 `json:"ratio_lower"`
	RatioUpper      *float64 `json:"ratio_upper"`
	ConfidenceLevel float64  `json:"confidence_level"`
	// Verdict is slower or faster (the interval excludes 1), no_difference
	// (it holds 1) or too_few_calls (either version has fewer than
	// MinCalls calls, so no interval).
	Verdict  string `json:"verdict"`
	MinCalls uint64 `json:"min_calls"`
	// Summary says it in one line, e.g. "version 3's p99 is 1.3x version
	// 2's (95% CI 1.1-1.5)".
	Summary string `json:"summary"`
}

// The verdicts of versionCompareDoc.
const (
	verdictSlower       = "slower"
	verdictFaster       = "faster"
	verdictNoDifference = "no_difference"
	verdictTooFewCalls  = "too_few_calls"
)

// compareVersions reads the version comparison of every model with two or
// more versions in the window. model says which model a series' calls
// are inference latency of ("" for none): the correlator's grouping, so
// the versions add up to the model's row. Calls without a version (the
// server's default) are left out: they may be any of the versions.
func compareVersions(mon *monitor.Registry, model func(monitor.SeriesKey) string) map[string]*versionsDoc {
	if mon == nil {
		return nil
	}
	ds := mon.Distributions(versionWindow, monitor.ComponentTotal, func(k monitor.SeriesKey) string {
		m := model(k)
		if m == "" || k.Version == "" {
			return ""
		}
		return m + "\x00" + k.Version
	})
	byModel := map[string]map[string]*monitor.Distribution{}
	for g, d := range ds {
		m, v, _ := strings.Cut(g, "\x00")
		if byModel[m] == nil {
			byModel[m] = map[string]*monitor.Distribution{}
		}
		byModel[m][v] = d
	}
	out := map[string]*versionsDoc{}
	for m, vs := range byModel {
		if len(vs) >= 2 {
			out[m] = versionsOf(vs)
		}
	}
	return out
}

// versionsOf compares the versions of one model (two or more).
func versionsOf(vs map[string]*monitor.Distribution) *versionsDoc {
	names := make([]string, 0, len(vs))
	for v := range vs {
		names = append(names, v)
	}
	sort.Slice(names, func(i, j int) bool { return newer(names[i], names[j]) })
	doc := &versionsDoc{Window: versionWindow.String()}
	for _, v := range names {
		st := vs[v].Stats()
		doc.Versions = append(doc.Versions, versionDoc{Version: v, Calls: st.Count, P50: st.P50.Seconds(), P99: st.P99.Seconds()})
	}
	canary, base := names[0], ""
	for _, v := range names[1:] {
		if base == "" || vs[v].Count() > vs[base].Count() {
			base = v
		}
	}
	doc.Comparison = compareDoc(canary, base, vs[canary], vs[base])
	return doc
}

// compareDoc compares canary's p99 with base's at monitor.CompareLevel.
func compareDoc(canary, base string, a, b *monitor.Distribution) versionCompareDoc {
	r := monitor.CompareQuantile(a, b, versionQuantile, monitor.CompareLevel)
	c := versionCompareDoc{
		Version: canary, BaselineVersion: base, Quantile: versionQuantile, ConfidenceLevel: monitor.CompareLevel,
		Ratio: num(r.Ratio), MinCalls: monitor.MinCalls(versionQuantile, 1-(1-monitor.CompareLevel)/2),
	}
	if r.B == 0 {
		c.Ratio = nil
	}
	q := "p" + strconv.FormatFloat(100*versionQuantile, 'f', -1, 64)
	if !r.OK {
		c.Verdict = verdictTooFewCalls
		c.Summary = fmt.Sprintf("too few calls to compare version %s's %s with version %s's: %d and %d in %s, each needs %d",
			canary, q, base, a.Count(), b.Count(), versionWindow, c.MinCalls)
		return c
	}
	c.RatioLower, c.RatioUpper = num(r.Lower), num(r.Upper)
	switch {
	case r.Slower():
		c.Verdict = verdictSlower
	case r.Faster():
		c.Verdict = verdictFaster
	default:
		c.Verdict = verdictNoDifference
	}
	c.Summary = fmt.Sprintf("version %s's %s is %sx version %s's (%s%% CI %s-%s)", canary, q, ratio(r.Ratio), base,
		strconv.FormatFloat(100*monitor.CompareLevel, 'f', -1, 64), ratio(math.Floor(100*r.Lower)/100), ratio(math.Ceil(100*r.Upper)/100))
	if c.Verdict == verdictNoDifference {
		c.Summary += ": no clear difference"
	}
	return c
}

// ratio formats a ratio with two decimals at most: 1.3, 1.04, 12.5. The
// bounds are rounded outwards first, so that a printed interval never
// looks narrower than the one computed.
func ratio(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// newer orders versions newest first: numeric versions (Triton's and
// TF-Serving's) by value, above any other, which go by name.
func newer(a, b string) bool {
	na, ea := strconv.ParseInt(a, 10, 64)
	nb, eb := strconv.ParseInt(b, 10, 64)
	switch {
	case ea == nil && eb == nil:
		return na > nb
	case ea == nil || eb == nil:
		return ea == nil
	}
	return a > b
}
