package baseline

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Recurring patterns (issue 47): a rise that comes back at the same time
// of day on several days is named, neither paged afresh every day nor
// learnt away silently. They belong to the baselines because the
// baselines already decide, every second, whether a model is up: a rise
// is a stretch of up samples, kept per model as its start (seasonal
// time) and length, at most maxRises of them, saved with the baseline.
//
// The seasonal levels cannot do this job: a 4-minute spike moves an
// hour's median not at all (it is not learnt), and if it were learnt it
// would be absorbed with no word to anyone. A named pattern keeps it
// visible ("every day at 10:00 for about 4 minutes, 3 days running: a
// scheduled job?") while the alert rules treat a rise inside it as
// expected (a warning), not as news.

// Bounds of the rise history.
const (
	// RecurringDays is how many days (today's included) a rise must
	// start at the same time of day to be named as recurring.
	RecurringDays = 3
	// RecurringSlack is how far apart the starts may be in time of day.
	RecurringSlack = 10 * time.Minute
	// minRise is the shortest rise kept: a few slow seconds are not a
	// job.
	minRise = 30 * time.Second
	// maxRises bounds each model's history: about a month of one daily
	// rise.
	maxRises = 32
	// riseMemory is how far back rises count.
	riseMemory = 14 * 24 * time.Hour
)

// PastRise is one finished rise of a model: when it started (seasonal
// time) and how long it lasted.
type PastRise struct {
	Start time.Time     `json:"start"`
	Dur   time.Duration `json:"duration_ns"`
}

// Pattern is a recurring rise.
type Pattern struct {
	// At is its usual start, time of day ("10:00").
	At string `json:"at"`
	// Minutes is its usual length.
	Minutes float64 `json:"about_minutes"`
	// Days is how many days it started there; Running says they were
	// consecutive.
	Days    int  `json:"days"`
	Running bool `json:"days_running"`
	// Note says it in words: "every day at 10:00 for about 4 minutes,
	// 3 days running: a scheduled job?".
	Note string `json:"note"`
}

// noteRise follows the model's rises at seasonal time st.
func (t *track) noteRise(st time.Time, up bool) {
	switch {
	case up && t.riseStart.IsZero():
		t.riseStart = st
	case !up && !t.riseStart.IsZero():
		if d := st.Sub(t.riseStart); d >= minRise {
			t.rises = append(t.rises, PastRise{Start: t.riseStart, Dur: d})
			if len(t.rises) > maxRises {
				t.rises = slices.Delete(t.rises, 0, len(t.rises)-maxRises)
			}
		}
		t.riseStart = time.Time{}
	}
}

// Recurring says whether model key's rise now (or, while calm, the
// present moment) falls inside a recurring pattern: past rises started
// within RecurringSlack of its time of day on at least RecurringDays-1
// other days of the last two weeks, today making RecurringDays.
func (s *Store) Recurring(key string) (Pattern, bool) {
	st := s.seasonal(s.opts.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tracks[key]
	if t == nil {
		return Pattern{}, false
	}
	at := st
	if !t.riseStart.IsZero() {
		at = t.riseStart
	}
	return s.patternAt(t, at, st, true)
}

// patternAt is the pattern of t's past rises around at's time of day;
// today says at's own day counts as one.
func (s *Store) patternAt(t *track, at, now time.Time, today bool) (Pattern, bool) {
	loc := s.opts.Location
	day := func(x time.Time) string { return x.In(loc).Format("2006-01-02") }
	atDay := day(at)
	days := map[string]bool{}
	var starts []float64 // minutes of the day
	var mins []float64
	for _, r := range t.rises {
		if now.Sub(r.Start) > riseMemory || (today && day(r.Start) == atDay) || !sameTimeOfDay(r.Start.In(loc), at.In(loc)) {
			continue
		}
		days[day(r.Start)] = true
		starts = append(starts, minuteOfDay(r.Start.In(loc)))
		mins = append(mins, r.Dur.Minutes())
	}
	if today {
		days[atDay] = true
		starts = append(starts, minuteOfDay(at.In(loc)))
	}
	if len(days) < RecurringDays || len(mins) == 0 {
		return Pattern{}, false
	}
	p := Pattern{Days: len(days), Minutes: math.Round(median(mins))}
	m := int(math.Round(median(starts)))
	p.At = fmt.Sprintf("%02d:%02d", m/60%24, m%60)
	// Running: the days are consecutive.
	ds := make([]string, 0, len(days))
	for d := range days {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	first, _ := time.Parse("2006-01-02", ds[0])
	last, _ := time.Parse("2006-01-02", ds[len(ds)-1])
	p.Running = int(last.Sub(first).Hours()/24)+1 == len(ds)
	length := fmt.Sprintf("about %.0f minutes", max(1, p.Minutes))
	if p.Minutes <= 1 {
		length = "about a minute"
	}
	when := fmt.Sprintf("%d days running", p.Days)
	if !p.Running {
		when = fmt.Sprintf("on %d days", p.Days)
	}
	p.Note = fmt.Sprintf("every day at %s for %s, %s: a scheduled job?", p.At, length, when)
	return p, true
}

// patterns lists t's recurring patterns among its past rises, each
// named once (by the rise with the most days around it).
func (s *Store) patterns(t *track, now time.Time) []Pattern {
	var out []Pattern
	used := make([]bool, len(t.rises))
	for {
		best, bestDays := -1, 0
		for i, r := range t.rises {
			if used[i] || now.Sub(r.Start) > riseMemory {
				continue
			}
			if p, ok := s.patternAt(t, r.Start, now, false); ok && p.Days > bestDays {
				best, bestDays = i, p.Days
			}
		}
		if best < 0 {
			return out
		}
		p, _ := s.patternAt(t, t.rises[best].Start, now, false)
		out = append(out, p)
		for i, r := range t.rises {
			if sameTimeOfDay(r.Start.In(s.opts.Location), t.rises[best].Start.In(s.opts.Location)) {
				used[i] = true
			}
		}
	}
}

func minuteOfDay(t time.Time) float64 {
	return float64(t.Hour()*60+t.Minute()) + float64(t.Second())/60
}

// sameTimeOfDay says whether a and b are within RecurringSlack of each
// other's time of day (across midnight too).
func sameTimeOfDay(a, b time.Time) bool {
	d := math.Abs(minuteOfDay(a) - minuteOfDay(b))
	d = math.Min(d, 24*60-d)
	return d <= RecurringSlack.Minutes()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return mid(s)
}

// Patterns returns model key's recurring patterns (none when it has
// none).
func (s *Store) Patterns(key string) []Pattern {
	st := s.seasonal(s.opts.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tracks[key]; t != nil {
		return s.patterns(t, st)
	}
	return nil
}
