package baseline

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
)

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// window builds a RecentStats whose p50, p90 and p99 lower bounds are
// known and equal to v.
func window(v time.Duration) monitor.RecentStats {
	var rs monitor.RecentStats
	st := &rs.Stats[monitor.ComponentTotal]
	st.Count, st.P50, st.P90, st.P99 = 1000, v, v, v
	b := &rs.Bounds[monitor.ComponentTotal]
	for i := range b.OK {
		b.OK[i], b.Lower[i] = true, v
	}
	return rs
}

// weekly is a latency pattern: 20ms, a weekday peak 09:00-10:59 at
// 40ms, weekends at 15ms.
func weekly(t time.Time) time.Duration {
	switch wd := t.Weekday(); {
	case wd == time.Saturday || wd == time.Sunday:
		return 15 * time.Millisecond
	case t.Hour() == 9 || t.Hour() == 10:
		return 40 * time.Millisecond
	}
	return 20 * time.Millisecond
}

// learn replays d of the pattern, one sample a minute, with 5% noise.
func learn(s *Store, c *fakeClock, d time.Duration, rng *rand.Rand) {
	end := c.t.Add(d)
	for ; c.t.Before(end); c.t = c.t.Add(time.Minute) {
		v := weekly(c.t).Seconds() * (0.95 + 0.1*rng.Float64())
		s.Observe("m", Sample{v, v * 1.2, v * 2}, false)
	}
}

var monday = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) // a Monday

func TestSeasonalPeakIsNormal(t *testing.T) {
	c := &fakeClock{monday}
	s := New(Options{Now: c.now, RecentSamples: 30})
	rng := rand.New(rand.NewPCG(1, 1))
	learn(s, c, 14*24*time.Hour, rng)
	// Third Tuesday.
	at := func(h, m int) {
		c.t = monday.AddDate(0, 0, 15).Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
	}

	learn(s, c, 9*time.Hour+30*time.Minute, rng) // to Tuesday 09:30
	b := s.Get("m")
	if b.Source != SourceSeasonal || b.Weeks != 2 || b.Widen != 1 {
		t.Fatalf("baseline = %+v", b)
	}
	if v := Up(b, window(40*time.Millisecond), DefaultRise); v.Up || !v.Decided {
		t.Errorf("the daily peak (40ms at 09:30) is up: %+v", v)
	}
	if v := Up(b, window(70*time.Millisecond), DefaultRise); !v.Up {
		t.Errorf("70ms at the peak is not up: %+v", v)
	}
	at(14, 0)
	learn(s, c, time.Hour, rng)
	b = s.Get("m")
	if v := Up(b, window(40*time.Millisecond), DefaultRise); !v.Up {
		t.Errorf("40ms at 15:00 (normal 20ms) is not up: %+v baseline %+v", v, b)
	}
	if v := Up(b, window(22*time.Millisecond), DefaultRise); v.Up {
		t.Errorf("22ms at 15:00 is up: %+v", v)
	}
}

func TestHolidayIsASunday(t *testing.T) {
	c := &fakeClock{monday}
	s := New(Options{Now: c.now, RecentSamples: 30, Holidays: []string{"2026-11-17"}})
	if h := s.hourOfWeek(time.Date(2026, 11, 17, 9, 0, 0, 0, time.UTC)); h != 6*24+9 {
		t.Errorf("holiday 09:00 is hour %d, want Sunday's %d", h, 6*24+9)
	}
	if h := s.hourOfWeek(time.Date(2026, 11, 16, 9, 0, 0, 0, time.UTC)); h != 9 {
		t.Errorf("Monday 09:00 is hour %d", h)
	}
}

func TestIncidentIsNotLearned(t *testing.T) {
	c := &fakeClock{monday}
	s := New(Options{Now: c.now, RecentSamples: 60, AcceptAfter: time.Hour})
	for range 60 {
		c.t = c.t.Add(time.Second)
		s.Observe("m", Sample{0.01, 0.01, 0.02}, false)
	}
	for range 30 * 60 { // 30 minutes up
		c.t = c.t.Add(time.Second)
		s.Observe("m", Sample{0.05, 0.05, 0.1}, true)
	}
	if b := s.Get("m"); math.Abs(b.Q[P50].Median-0.01) > 1e-6 {
		t.Errorf("after 30 minutes up the baseline p50 = %v, want 0.01", b.Q[P50].Median)
	}
	for range 50 * 60 { // past AcceptAfter: the new normal, once it outweighs the old
		c.t = c.t.Add(time.Second)
		s.Observe("m", Sample{0.05, 0.05, 0.1}, true)
	}
	if b := s.Get("m"); math.Abs(b.Q[P50].Median-0.05) > 1e-6 {
		t.Errorf("after an hour up the baseline p50 = %v, want the new level 0.05", b.Q[P50].Median)
	}
}

// TestNoBaselineBeforeItsTime: however many samples a steep start gives
// (one a second from the first call), the recent level is no baseline
// until they span MinLearn: a cold start's first seconds are not normal.
func TestNoBaselineBeforeItsTime(t *testing.T) {
	c := &fakeClock{monday}
	s := New(Options{Now: c.now})
	for i := range 30 {
		if i > 0 {
			c.t = c.t.Add(time.Second)
		}
		// A start ramping from slow to steady: its first seconds are
		// the slowest.
		s.Observe("m", Sample{0.05 - 0.0013*float64(min(i, 30)), 0.06, 0.08}, false)
		if b := s.Get("m"); b.Known() || b.Source != "learning" {
			t.Fatalf("after %d samples over %v: baseline %+v, want learning", i+1, time.Duration(i)*time.Second, b)
		}
	}
	c.t = c.t.Add(time.Second)
	s.Observe("m", Sample{0.011, 0.06, 0.08}, false)
	if b := s.Get("m"); b.Source != SourceRecent {
		t.Fatalf("after 31 samples over 30s: %+v, want a recent baseline", b)
	}
	if infos := s.Infos(); len(infos) != 1 || infos[0].Source != SourceRecent {
		t.Errorf("Infos %+v, want the same source", infos)
	}
}

func TestRecentBaselineEarly(t *testing.T) {
	c := &fakeClock{monday}
	s := New(Options{Now: c.now, MinLearn: -1})
	if b := s.Get("m"); b.Known() {
		t.Fatalf("baseline before any sample: %+v", b)
	}
	for i := range DefaultMinRecent {
		c.t = c.t.Add(time.Second)
		s.Observe("m", Sample{0.01, 0.012, 0.02}, false)
		if b := s.Get("m"); b.Known() != (i == DefaultMinRecent-1) {
			t.Fatalf("after %d samples Known = %v", i+1, b.Known())
		}
	}
	b := s.Get("m")
	if b.Source != SourceRecent || b.Widen != 2 {
		t.Errorf("early baseline = %+v", b)
	}
	if v := Up(b, window(15*time.Millisecond), DefaultRise); !v.Up {
		t.Errorf("x1.5 on an early baseline is not up: %+v", v)
	}
	// Too few calls: no verdict.
	var few monitor.RecentStats
	if v := Up(b, few, DefaultRise); v.Decided || v.Up {
		t.Errorf("Up without bounds = %+v", v)
	}
}

func TestSaveLoad(t *testing.T) {
	c := &fakeClock{monday}
	s := New(Options{Now: c.now, RecentSamples: 30})
	learn(s, c, 8*24*time.Hour, rand.New(rand.NewPCG(2, 2)))
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	s2 := New(Options{Now: c.now, RecentSamples: 30})
	if err := s2.Load(&buf); err != nil {
		t.Fatal(err)
	}
	if a, b := s.Get("m"), s2.Get("m"); a != b {
		t.Errorf("after Load: %+v\nwant %+v", b, a)
	}
	if err := s2.Load(bytes.NewBufferString(`{"version":9}`)); err == nil {
		t.Error("Load of another version succeeded")
	}
}

func TestScaledClock(t *testing.T) {
	c := &fakeClock{monday}
	s := New(Options{Now: c.now, Scale: 3600})
	c.t = c.t.Add(2 * time.Second) // two hours of seasonal time
	if got := s.Clock(); !got.Equal(monday.Add(2 * time.Hour)) {
		t.Errorf("Clock = %v", got)
	}
}

// TestCreepIsCaught: a slow creep of +10ms/min on a 100ms model does not
// drag the baseline along; it is up within a few minutes.
func TestCreepIsCaught(t *testing.T) {
	c := &fakeClock{monday}
	s := New(Options{Now: c.now})
	rng := rand.New(rand.NewPCG(3, 3))
	for range 1800 { // 30 calm minutes
		c.t = c.t.Add(time.Second)
		v := 0.1 * (0.97 + 0.06*rng.Float64())
		s.Observe("m", Sample{v, v * 1.1, v * 1.4}, false)
	}
	upAt := -1
	for i := range 600 { // 10 minutes of creep
		c.t = c.t.Add(time.Second)
		v := 0.1*(0.97+0.06*rng.Float64()) + float64(i)/60*0.010
		w := window(time.Duration(v * float64(time.Second)))
		verdict := Up(s.Get("m"), w, DefaultRise)
		s.Observe("m", Sample{v, v * 1.1, v * 1.4}, verdict.Up)
		if verdict.Up {
			upAt = i
			break
		}
	}
	if upAt < 0 || upAt > 240 {
		t.Fatalf("creep up after %ds, want within 4 minutes", upAt)
	}
	t.Logf("creep +10ms/min on 100ms: up after %ds", upAt)
}
