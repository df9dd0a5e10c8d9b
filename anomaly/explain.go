package anomaly

import (
	"fmt"
	"math"
	"strings"
)

// A feature is "flat" in the words when its standardised deviation is
// below this, and "up" or "down" from it.
const flatZ = 2

// pattern names a shape of the top features and says it in words.
type pattern struct {
	name  string
	match func(e *explainer) bool
	say   func(e *explainer) string
}

// patterns are tried in order; the first that matches gives the
// sentence. Each looks at the first feature named, so the words and the
// attribution agree.
var patterns = []pattern{
	{
		name: "throughput_collapse",
		match: func(e *explainer) bool {
			return e.first(Calls) && e.down(Calls) && !e.up(P99) && !e.up(P50)
		},
		say: func(e *explainer) string {
			s := e.change(Calls) + " with p99 " + e.changeOrFlat(P99)
			if e.up(QueueP99) {
				s += " and " + e.change(QueueP99)
			}
			return s + ": fewer calls answered, not slower ones"
		},
	},
	{
		name: "queue_growth",
		match: func(e *explainer) bool {
			return e.first(QueueP99) && e.up(QueueP99) && !e.up(P99)
		},
		say: func(e *explainer) string {
			return e.change(QueueP99) + " with p99 " + e.changeOrFlat(P99) +
				": calls wait longer before the model, which keeps its pace so far"
		},
	},
	{
		name: "errors_and_latency",
		match: func(e *explainer) bool {
			return (e.first(Errors) || e.first(P50)) && e.rising(Errors) && e.rising(P50)
		},
		say: func(e *explainer) string {
			return e.change(Errors) + " with " + e.change(P50) +
				": calls fail and slow down together, each too little for its own rule"
		},
	},
	{
		name: "inputs_grew",
		match: func(e *explainer) bool {
			return e.first(InputSize) && e.up(InputSize)
		},
		say: func(e *explainer) string {
			s := e.change(InputSize)
			if e.up(P99) {
				s += " with " + e.change(P99)
			}
			return s + ": the inputs grew, so each call does more work"
		},
	},
	{
		name: "gpu_saturation",
		match: func(e *explainer) bool {
			return e.first(GPUUtil) && e.up(GPUUtil)
		},
		say: func(e *explainer) string {
			s := e.change(GPUUtil)
			if e.up(P99) {
				s += " with " + e.change(P99)
			}
			return s + ": the GPU is saturated"
		},
	},
	{
		name: "latency_rise",
		match: func(e *explainer) bool {
			return (e.first(P50) && e.up(P50)) || (e.first(P99) && e.up(P99))
		},
		say: func(e *explainer) string {
			s := e.change(P50) + " and " + e.change(P99)
			if e.up(QueueP99) {
				s += ", " + e.change(QueueP99)
			}
			return s + ": the model answers more slowly"
		},
	},
	{
		name: "errors",
		match: func(e *explainer) bool {
			return e.first(Errors) && e.up(Errors)
		},
		say: func(e *explainer) string {
			return e.change(Errors) + " with p50 " + e.changeOrFlat(P50) + ": calls fail"
		},
	},
}

// Pattern names a generic explanation.
const genericPattern = "unusual"

// explainer reads the detector's last second for the words.
type explainer struct{ det *Detector }

func (e *explainer) index(name string) int {
	for i, f := range e.det.feats {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// first reports whether the feature is the first one named.
func (e *explainer) first(name string) bool {
	top := e.det.last.Top
	return len(top) > 0 && e.det.feats[top[0]].Name == name
}

func (e *explainer) up(name string) bool {
	i := e.index(name)
	return i >= 0 && !math.IsNaN(e.det.x[i]) && e.det.z[i] >= flatZ
}

// rising reports a feature at least one spread above its usual: enough
// to be named beside another in a compound pattern.
func (e *explainer) rising(name string) bool {
	i := e.index(name)
	return i >= 0 && !math.IsNaN(e.det.x[i]) && e.det.z[i] >= 1
}

func (e *explainer) down(name string) bool {
	i := e.index(name)
	return i >= 0 && !math.IsNaN(e.det.x[i]) && e.det.z[i] <= -flatZ
}

// change says the feature's deviation in its unit: "p99 +35%".
func (e *explainer) change(name string) string {
	i := e.index(name)
	if i < 0 {
		return name
	}
	return e.det.feats[i].Label + " " + e.amount(i)
}

// changeOrFlat is the amount alone, or "flat" when the feature did not
// move (or is missing: "unknown").
func (e *explainer) changeOrFlat(name string) string {
	i := e.index(name)
	switch {
	case i < 0 || math.IsNaN(e.det.x[i]):
		return "unknown"
	case math.Abs(e.det.z[i]) < flatZ:
		return "flat"
	}
	return e.amount(i)
}

func (e *explainer) amount(i int) string {
	v := e.det.x[i]
	if math.IsNaN(v) {
		return "unknown"
	}
	switch e.det.feats[i].Unit {
	case Points:
		return fmt.Sprintf("%+.2f pts", 100*v)
	case Sigma:
		return fmt.Sprintf("%+.1fσ", v)
	}
	r := math.Exp(v)
	switch {
	case r >= 10:
		return fmt.Sprintf("×%.0f", r)
	case r >= 2:
		return fmt.Sprintf("×%.1f", r)
	}
	return strings.Replace(fmt.Sprintf("%+.0f%%", 100*(r-1)), "-", "−", 1)
}

// Explain says in words what made the latest second's score: a named
// pattern when the top features match one (throughput collapse with flat
// latency, queue growth with flat p99, errors with p50 up, inputs grew,
// GPU saturation, latency rise, errors), else the top features and their
// changes. Empty while learning or when no feature stands out.
func (det *Detector) Explain() string {
	_, s := det.explain()
	return s
}

// Pattern names the shape of the latest second's top features
// ("throughput_collapse", "queue_growth", "errors_and_latency",
// "inputs_grew", "gpu_saturation", "latency_rise", "errors", or
// "unusual" for none of them); empty when no feature stands out.
func (det *Detector) Pattern() string {
	p, _ := det.explain()
	return p
}

func (det *Detector) explain() (string, string) {
	if len(det.last.Top) == 0 {
		return "", ""
	}
	e := &explainer{det: det}
	for _, p := range patterns {
		if p.match(e) {
			return p.name, p.say(e)
		}
	}
	var b strings.Builder
	b.WriteString("unusual together: ")
	for n, i := range det.last.Top {
		switch {
		case n > 0 && n == len(det.last.Top)-1:
			b.WriteString(" and ")
		case n > 0:
			b.WriteString(", ")
		}
		b.WriteString(det.feats[i].Label + " " + e.amount(i))
	}
	if len(det.last.Top) == 1 {
		return genericPattern, det.feats[det.last.Top[0]].Label + " " + e.amount(det.last.Top[0]) + ": unusual for this model"
	}
	return genericPattern, b.String()
}
