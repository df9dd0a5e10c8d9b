package baseline

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRecurringRise: a 4-minute rise at 10:00 is named from its third
// day, not on the first two; a rise at 15:00 is not; the history is
// saved and loaded, and a file without it still loads.
func TestRecurringRise(t *testing.T) {
	now := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	s := New(Options{Now: func() time.Time { return now }})
	sm := Sample{0.1, 0.12, 0.15}
	at := func(day int, hh, mm int) { now = time.Date(2026, 11, 2+day, hh, mm, 0, 0, time.UTC) }
	spike := func(day, hh, mm int, check func(p Pattern, ok bool)) {
		at(day, hh, mm)
		for i := range 6 * 60 {
			s.Observe("m", sm, i >= 60 && i < 60+4*60)
			if i == 61 && check != nil {
				check(s.Recurring("m"))
			}
			now = now.Add(time.Second)
		}
	}
	for day := range 3 {
		spike(day, 9, 59, func(p Pattern, ok bool) {
			if ok != (day == 2) {
				t.Errorf("day %d: recurring %v (%+v), want %v", day+1, ok, p, day == 2)
			}
			if ok && p.Note != "every day at 10:00 for about 4 minutes, 3 days running: a scheduled job?" {
				t.Errorf("note %q", p.Note)
			}
		})
	}
	spike(3, 14, 59, func(p Pattern, ok bool) {
		if ok {
			t.Errorf("a rise at 15:00 named %+v", p)
		}
	})
	infos := s.Infos()
	if len(infos) != 1 || len(infos[0].Recurring) != 1 || infos[0].Recurring[0].At != "10:00" || infos[0].Recurring[0].Days != 3 {
		t.Fatalf("infos: %+v", infos)
	}
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	s2 := New(Options{Now: func() time.Time { return now }})
	if err := s2.Load(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if in := s2.Infos(); len(in) != 1 || len(in[0].Recurring) != 1 {
		t.Fatalf("loaded: %+v", in)
	}
	old := strings.ReplaceAll(buf.String(), `"rises"`, `"ignored"`)
	if err := New(Options{}).Load(strings.NewReader(old)); err != nil {
		t.Fatalf("a file without rises: %v", err)
	}
}
