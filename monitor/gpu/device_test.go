package gpu

import (
	"reflect"
	"testing"
)

func TestReasonNames(t *testing.T) {
	cases := []struct {
		mask uint64
		want []string
	}{
		{0, nil},
		{0x1, []string{"gpu_idle"}},
		{0x4 | 0x80, []string{"sw_power_cap", "hw_power_brake_slowdown"}},
		{0x1ff, []string{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
			"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"}},
		// Bits newer drivers define (board limit, reliability) are
		// reported once as unknown rather than dropped.
		{0x200 | 0x400 | 0x8, []string{"hw_slowdown", "unknown"}},
	}
	for _, c := range cases {
		if got := ReasonNames(c.mask); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ReasonNames(%#x) = %v, want %v", c.mask, got, c.want)
		}
	}
}

func TestThrottled(t *testing.T) {
	all := FieldClockEventReasons | FieldSMClock | FieldSMClockMax
	cases := []struct {
		name string
		d    Device
		want bool
	}{
		{"power cap below max", Device{ClockEventReasons: uint64(ReasonSWPowerCap), SMClockHz: 1.2e9, SMClockMaxHz: 1.98e9, Known: all}, true},
		{"thermal at max clock", Device{ClockEventReasons: uint64(ReasonSWThermalSlowdown), SMClockHz: 1.98e9, SMClockMaxHz: 1.98e9, Known: all}, false},
		{"idle at low clock", Device{ClockEventReasons: uint64(ReasonGPUIdle), SMClockHz: 0.3e9, SMClockMaxHz: 1.98e9, Known: all}, false},
		{"hw slowdown, clocks unknown", Device{ClockEventReasons: uint64(ReasonHWSlowdown), Known: FieldClockEventReasons}, true},
		{"no reasons reported", Device{SMClockHz: 0.3e9, SMClockMaxHz: 1.98e9, Known: FieldSMClock | FieldSMClockMax}, false},
	}
	for _, c := range cases {
		if got := c.d.Throttled(); got != c.want {
			t.Errorf("%s: Throttled = %v, want %v", c.name, got, c.want)
		}
	}
}
