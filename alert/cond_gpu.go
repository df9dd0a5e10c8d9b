package alert

import (
	"fmt"
	"strings"

	"github.com/infergate/infergate/monitor/gpu"
)

// KindGPU compares a reading of a GPU (the model's, or each device for a
// rule of GPU conditions only) with a value.
const KindGPU = "gpu"

// gpuCond is a compiled gpu condition.
type gpuCond struct {
	op    string
	field string  // utilization, memory_ratio, temperature or throttled
	value float64 // ratio, degrees Celsius, or 0.5 for throttled
}

func parseGPU(cc *Condition, cm condCommon, _ *Config) (condition, error) {
	switch cc.Field {
	case "utilization", "memory_ratio", "temperature", "throttled":
	default:
		return nil, fmt.Errorf("field: %q, want utilization, memory_ratio, temperature or throttled", cc.Field)
	}
	cd := &gpuCond{op: cm.op, field: cc.Field}
	if cc.Field == "throttled" {
		cd.value = 0.5
		return cd, nil
	}
	v, err := parseRatio(cc.Value)
	if err != nil {
		return nil, fmt.Errorf("value: %v", err)
	}
	cd.value = v
	return cd, nil
}

func (cd *gpuCond) kind() string { return KindGPU }

// models adds none: a GPU reading names no window.
func (cd *gpuCond) models(*frame, selector, map[string]bool) {}

func (cd *gpuCond) eval(f *frame, _ *Rule, _ int, model string) outcome {
	ms, ok := f.models[model]
	if !ok || ms.GPU == nil {
		return outcome{note: "no GPU reading for the model"}
	}
	return cd.device(*ms.GPU)
}

func (cd *gpuCond) device(d gpu.Device) outcome {
	o := outcome{threshold: cd.value, op: cd.op, bound: "its bound"}
	switch cd.field {
	case "utilization":
		if !d.Has(gpu.FieldUtilization) {
			return outcome{note: "utilization not reported"}
		}
		o.value, o.unit, o.measure = d.Utilization, "ratio", "GPU utilization"
	case "memory_ratio":
		r, ok := d.MemoryRatio()
		if !ok {
			return outcome{note: "memory not reported"}
		}
		o.value, o.unit, o.measure = r, "ratio", "GPU memory used"
	case "temperature":
		if !d.Has(gpu.FieldTemperature) {
			return outcome{note: "temperature not reported"}
		}
		o.value, o.unit, o.measure = d.TemperatureCelsius, "°C", "GPU temperature"
	case "throttled":
		o.measure, o.text = "GPU", "not throttled"
		if d.Throttled() {
			o.value, o.text = 1, "throttled"
		}
		o.note = strings.Join(d.ActiveReasons(), ",")
		if o.note != "" && o.value == 1 {
			o.text += " (" + o.note + ")"
		}
	}
	o.holds = triOf(compare(cd.op, o.value, cd.value))
	return o
}
