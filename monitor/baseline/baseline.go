package baseline

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/infergate/infergate/internal/grow"
	"github.com/infergate/infergate/monitor"
)

// The quantiles a baseline tracks, indexes into Sample and Baseline.Q.
const (
	P50 = iota
	P90
	P99
	NumQuantiles
)

// Quantiles are the tracked quantiles as fractions.
var Quantiles = [NumQuantiles]float64{0.5, 0.9, 0.99}

// QuantileNames names them for JSON and labels.
var QuantileNames = [NumQuantiles]string{"p50", "p90", "p99"}

// monitorIndex maps a tracked quantile to its index in monitor.Quantiles.
var monitorIndex = [NumQuantiles]int{0, 1, 2}

// HoursPerWeek is the number of seasonal slots.
const HoursPerWeek = 7 * 24

// Defaults of Options.
const (
	DefaultWeeks         = 4
	DefaultRecentSamples = 360
	DefaultRecentEvery   = 5
	DefaultMinRecent     = 10
	DefaultMinLearn      = 30 * time.Second
	DefaultAcceptAfter   = time.Hour
	DefaultMaxKeys       = 10000
	// minHourSamples is how many samples an hour needs to be learned: a
	// few, so that a replay at a compressed clock (an hour in seconds)
	// still learns; each hour's level is a median over weeks anyway.
	minHourSamples = 2
	// hourBuf is how many samples per quantile an hour keeps (thinned
	// evenly past it).
	hourBuf = 128
)

// Options configures a Store; zero values mean the documented defaults.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Scale makes the seasonal clock run Scale times faster than Now from
	// the moment the store is created (a replay of a week in minutes for
	// the bench); 0 or 1 means real time.
	Scale float64
	// Location is the time zone of the hours of the week; nil means UTC.
	Location *time.Location
	// Holidays are dates ("2006-01-02") that count as Sundays.
	Holidays []string
	// Weeks is how many weeks of history each hour keeps; 0 means 4.
	Weeks int
	// RecentSamples is how many calm samples the recent level keeps; 0
	// means 360.
	RecentSamples int
	// RecentEvery keeps one calm sample in RecentEvery for the recent
	// level; 0 means 5. With the defaults the level is the median of the
	// last 30 minutes at one sample a second: slow enough that a creep of
	// a few ms a minute does not drag the baseline along with it, while
	// the first level exists within a minute of start.
	RecentEvery int
	// MinRecent is how many calm samples the recent level needs; 0 means
	// 10.
	MinRecent int
	// MinLearn is how long (in Now's time) a model's calm samples must
	// span before its recent level is a baseline: a start's first seconds
	// (cold caches and connections, a load still ramping up) are not what
	// is normal for it, and a page against them would be false. 0 means
	// 30s; negative, none.
	MinLearn time.Duration
	// AcceptAfter is how long a model must stay up before its new level
	// is learned; 0 means 1h, negative means never.
	AcceptAfter time.Duration
	// MaxKeys bounds the models tracked; 0 means 10000. Observations of
	// further models are ignored.
	MaxKeys int
}

// Sample is one observation: a model's recent quantiles in seconds,
// indexed by P50, P90, P99; a zero entry was not measured.
type Sample [NumQuantiles]float64

// SampleOf reads a Sample from a monitor window's total latency.
func SampleOf(rs monitor.RecentStats) Sample {
	st := rs.Stats[monitor.ComponentTotal]
	return Sample{st.P50.Seconds(), st.P90.Seconds(), st.P99.Seconds()}
}

// Level is a robust summary of samples.
type Level struct {
	// Median is the typical value in seconds; 0 when unknown.
	Median float64 `json:"median_seconds"`
	// Spread is the robust standard deviation (1.4826 × MAD) in seconds.
	Spread float64 `json:"spread_seconds"`
}

// Baseline is what is normal for one model at one instant.
type Baseline struct {
	// Q holds the level per tracked quantile.
	Q [NumQuantiles]Level
	// Source is "learning" (too few calm samples, or too short a time), "recent" (no seasonal history
	// for this hour yet) or "seasonal".
	Source string
	// Widen is the factor applied to the band: 2 with no week of history
	// for this hour, 1.5 with one, 1 with more.
	Widen float64
	// Weeks is how many weeks of history this hour of the week has.
	Weeks int
	// RecentSamples is how many calm samples the recent level holds.
	RecentSamples int
	// HourOfWeek is 0 (Monday 00:00) to 167.
	HourOfWeek int
}

// Level returns quantile q's level as a duration (0 when unknown).
func (b Baseline) Level(q int) time.Duration {
	return time.Duration(math.Round(b.Q[q].Median * float64(time.Second)))
}

// Known reports whether there is a baseline at all.
func (b Baseline) Known() bool { return b.Source != SourceNone }

// Sources of a Baseline. SourceNone is a model still learning: too few
// calm samples, or over too short a time (Options.MinLearn).
const (
	SourceNone     = "learning"
	SourceRecent   = "recent"
	SourceSeasonal = "seasonal"
)

// Rise says how far above its baseline a quantile must be to count as up.
type Rise struct {
	// Factor: at least Factor × the level; 0 means 1.25.
	Factor float64
	// Band: at least the level plus Band spreads; 0 means 4, negative
	// means none.
	Band float64
	// Min: at least this much above the level (jitter on sub-millisecond
	// models is not a rise); 0 means 1ms, negative means none.
	Min time.Duration
}

// DefaultRise is the rise the GPU correlation and the default rules use.
var DefaultRise = Rise{Factor: 1.25, Band: 4, Min: time.Millisecond}

func (r Rise) withDefaults() Rise {
	if r.Factor <= 0 {
		r.Factor = DefaultRise.Factor
	}
	if r.Band == 0 {
		r.Band = DefaultRise.Band
	}
	if r.Min == 0 {
		r.Min = DefaultRise.Min
	}
	return r
}

// Threshold returns the latency above which quantile q (P50, P90, P99)
// is up; ok is false without a baseline.
func (b Baseline) Threshold(q int, r Rise) (time.Duration, bool) {
	l := b.Q[q]
	if !b.Known() || l.Median <= 0 {
		return 0, false
	}
	r = r.withDefaults()
	t := l.Median * r.Factor
	if r.Band > 0 {
		t = math.Max(t, l.Median+r.Band*b.Widen*l.Spread)
	}
	if r.Min > 0 {
		t = math.Max(t, l.Median+r.Min.Seconds())
	}
	return time.Duration(math.Round(t * float64(time.Second))), true
}

// Verdict is the outcome of Up.
type Verdict struct {
	// Up is true when some tracked quantile's lower bound is above its
	// threshold.
	Up bool
	// Decided is false when no quantile could be judged: no baseline, or
	// too few calls for any bound.
	Decided bool
	// Quantile is the index (P50...) that is up, or the highest one
	// judged.
	Quantile int
	// Lower and Threshold are that quantile's bound and threshold.
	Lower, Threshold time.Duration
}

// Up decides whether a window's total latency is above the baseline for
// any of the tracked quantiles in qs (nil means all).
func Up(b Baseline, rs monitor.RecentStats, r Rise, qs ...int) Verdict {
	if qs == nil {
		qs = []int{P50, P90, P99}
	}
	return above(rs, qs, func(q int) (time.Duration, bool) { return b.Threshold(q, r) })
}

// above decides whether, for any quantile in qs, the window's lower
// confidence bound exceeds threshold(q); quantiles without a threshold or
// a bound are skipped.
func above(rs monitor.RecentStats, qs []int, threshold func(q int) (time.Duration, bool)) Verdict {
	var v Verdict
	bounds := rs.Bounds[monitor.ComponentTotal]
	for _, q := range qs {
		th, ok := threshold(q)
		mi := monitorIndex[q]
		if !ok || !bounds.OK[mi] {
			continue
		}
		v.Decided = true
		v.Quantile, v.Lower, v.Threshold = q, bounds.Lower[mi], th
		if bounds.Lower[mi] > th {
			v.Up = true
			return v
		}
	}
	return v
}

// Store holds the baselines of many models. Its methods are safe for
// concurrent use.
type Store struct {
	opts     Options
	start    time.Time
	holidays map[string]bool
	mu       sync.Mutex
	tracks   map[string]*track
}

// New returns an empty store.
func New(opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Location == nil {
		opts.Location = time.UTC
	}
	if opts.Weeks <= 0 {
		opts.Weeks = DefaultWeeks
	}
	if opts.RecentSamples <= 0 {
		opts.RecentSamples = DefaultRecentSamples
	}
	if opts.RecentEvery <= 0 {
		opts.RecentEvery = DefaultRecentEvery
	}
	if opts.MinRecent <= 0 {
		opts.MinRecent = DefaultMinRecent
	}
	if opts.MinLearn == 0 {
		opts.MinLearn = DefaultMinLearn
	}
	if opts.AcceptAfter == 0 {
		opts.AcceptAfter = DefaultAcceptAfter
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultMaxKeys
	}
	s := &Store{opts: opts, start: opts.Now(), holidays: map[string]bool{}, tracks: map[string]*track{}}
	for _, d := range opts.Holidays {
		s.holidays[d] = true
	}
	return s
}

// Clock returns the store's seasonal time: Now, sped up by Scale.
func (s *Store) Clock() time.Time { return s.seasonal(s.opts.Now()) }

func (s *Store) seasonal(now time.Time) time.Time {
	if s.opts.Scale <= 0 || s.opts.Scale == 1 {
		return now
	}
	return s.start.Add(time.Duration(float64(now.Sub(s.start)) * s.opts.Scale))
}

// hourOfWeek returns 0 (Monday 00:00) to 167 for t, a holiday counting
// as a Sunday.
func (s *Store) hourOfWeek(t time.Time) int {
	t = t.In(s.opts.Location)
	day := (int(t.Weekday()) + 6) % 7 // Monday = 0
	if s.holidays[t.Format("2006-01-02")] {
		day = 6
	}
	return day*24 + t.Hour()
}

// track is one model's history.
type track struct {
	recent [NumQuantiles]ring
	// calm counts the calm samples observed (RecentEvery thins them).
	calm int
	// recentLevel caches the recent level until the ring changes.
	recentLevel [NumQuantiles]Level
	recentOK    bool
	hours       weekHours
	cur         hourAcc
	upSince     time.Time // zero while calm
	lastSeen    time.Time
	// riseStart is when the current rise began (seasonal time), zero
	// while calm; rises are the past ones, oldest first (recurring.go).
	riseStart time.Time
	rises     []PastRise
	// firstCalm is when its first calm sample came (Now's time); zero
	// for a track restored from a state file, which has learnt already.
	firstCalm time.Time
}

// weekHours is a track's hours of the week, the table made when the
// first hour is learnt: 1,344 bytes of empty pointers per model (twice,
// with its endpoints') for a model that has not run an hour yet.
type weekHours struct{ h *[HoursPerWeek]*hourHist }

// at is hour i's history, nil when none.
func (w *weekHours) at(i int) *hourHist {
	if w.h == nil {
		return nil
	}
	return w.h[i]
}

// make returns hour i's history, made empty if it had none.
func (w *weekHours) make(i int) *hourHist {
	if w.h == nil {
		w.h = new([HoursPerWeek]*hourHist)
	}
	if w.h[i] == nil {
		w.h[i] = &hourHist{}
	}
	return w.h[i]
}

// set makes hh hour i's history.
func (w *weekHours) set(i int, hh *hourHist) {
	if w.h == nil {
		w.h = new([HoursPerWeek]*hourHist)
	}
	w.h[i] = hh
}

// all is every hour's history (nil for an hour without), none before the
// first.
func (w *weekHours) all() []*hourHist {
	if w.h == nil {
		return nil
	}
	return w.h[:]
}

// ring is a ring of recent calm samples of one quantile, in microseconds.
type ring struct {
	v   []float32
	pos int
}

// micros stores seconds as float32 microseconds: exact for whole
// microseconds (the histograms' unit) up to 16 s, and half the memory of
// float64.
func micros(x float64) float32 { return float32(math.Round(x * 1e6)) }

func (r *ring) push(x float64, size int) {
	if len(r.v) < size {
		r.v = append(grow.Capped(r.v, 8, size), micros(x))
		return
	}
	r.v[r.pos] = micros(x)
	r.pos = (r.pos + 1) % size
}

// hourHist is one hour of the week's learned levels, one per week, in
// microseconds.
type hourHist struct {
	Median [][NumQuantiles]float32 `json:"median"`
	Spread [][NumQuantiles]float32 `json:"spread"`
}

func (h *hourHist) push(med, spread [NumQuantiles]float32, weeks int) {
	h.Median = append(h.Median, med)
	h.Spread = append(h.Spread, spread)
	if len(h.Median) > weeks {
		h.Median = h.Median[len(h.Median)-weeks:]
		h.Spread = h.Spread[len(h.Spread)-weeks:]
	}
}

// hourAcc accumulates the samples of the current hour, thinned evenly to
// at most hourBuf.
type hourAcc struct {
	start  time.Time // seasonal time of the first sample; zero when empty
	hour   int
	stride int
	seen   int
	v      [NumQuantiles][]float32
}

func (a *hourAcc) add(sm Sample) {
	if a.stride == 0 {
		a.stride = 1
	}
	a.seen++
	if (a.seen-1)%a.stride != 0 {
		return
	}
	for q := range NumQuantiles {
		if sm[q] > 0 {
			a.v[q] = append(a.v[q], micros(sm[q]))
		}
	}
	if len(a.v[P50]) >= hourBuf {
		for q := range NumQuantiles {
			a.v[q] = thin(a.v[q])
		}
		a.stride *= 2
	}
}

// thin keeps every other value.
func thin(v []float32) []float32 {
	out := v[:0]
	for i := 0; i < len(v); i += 2 {
		out = append(out, v[i])
	}
	return out
}

// Observe learns one sample of model key taken at the store's clock: up
// says whether the model was up at the time (its samples are not learned
// until it has been up for AcceptAfter).
func (s *Store) Observe(key string, sm Sample, up bool) {
	now := s.opts.Now()
	st := s.seasonal(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tracks[key]
	if t == nil {
		if len(s.tracks) >= s.opts.MaxKeys {
			return
		}
		t = &track{}
		s.tracks[key] = t
	}
	t.lastSeen = now
	t.noteRise(st, up)
	if up {
		if t.upSince.IsZero() {
			t.upSince = now
		}
		if s.opts.AcceptAfter < 0 || now.Sub(t.upSince) < s.opts.AcceptAfter {
			return
		}
	} else {
		t.upSince = time.Time{}
	}
	if t.calm == 0 && t.firstCalm.IsZero() && len(t.recent[P50].v) == 0 {
		t.firstCalm = now
	}
	// Every sample until the ring holds a fifth of its size (a level a
	// minute after start), then one in RecentEvery.
	if len(t.recent[P50].v) < s.opts.RecentSamples/s.opts.RecentEvery || t.calm%s.opts.RecentEvery == 0 {
		for q := range NumQuantiles {
			if sm[q] > 0 {
				t.recent[q].push(sm[q], s.opts.RecentSamples)
			}
		}
		t.recentOK = false
	}
	t.calm++
	h := s.hourOfWeek(st)
	if !t.cur.start.IsZero() && (h != t.cur.hour || st.Sub(t.cur.start) >= time.Hour) {
		s.closeHour(t)
	}
	if t.cur.start.IsZero() {
		t.cur.start, t.cur.hour = st, h
	}
	t.cur.add(sm)
}

// closeHour learns the current hour's samples into its slot.
func (s *Store) closeHour(t *track) {
	a := &t.cur
	if len(a.v[P50]) >= minHourSamples {
		var med, spread [NumQuantiles]float32
		for q := range NumQuantiles {
			m, sp := robust(a.v[q])
			med[q], spread[q] = micros(m), micros(sp)
		}
		t.hours.make(a.hour).push(med, spread, s.opts.Weeks)
	}
	for q := range NumQuantiles {
		a.v[q] = a.v[q][:0]
	}
	a.start, a.seen, a.stride = time.Time{}, 0, 1
}

// Get returns model key's baseline now.
func (s *Store) Get(key string) Baseline {
	now := s.opts.Now()
	st := s.seasonal(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.get(s.tracks[key], s.hourOfWeek(st), now)
}

func (s *Store) get(t *track, how int, now time.Time) Baseline {
	b := Baseline{Source: SourceNone, HourOfWeek: how, Widen: 2}
	if t == nil {
		return b
	}
	b.RecentSamples = len(t.recent[P50].v)
	learnt := s.opts.MinLearn < 0 || t.firstCalm.IsZero() || now.Sub(t.firstCalm) >= s.opts.MinLearn
	if b.RecentSamples >= s.opts.MinRecent && learnt {
		b.Source = SourceRecent
		if !t.recentOK {
			for q := range NumQuantiles {
				m, sp := robust(t.recent[q].v)
				t.recentLevel[q] = Level{Median: m, Spread: sp}
			}
			t.recentOK = true
		}
		b.Q = t.recentLevel
	}
	// The hour and the next one: on a rising edge (the morning peak) the
	// coming hour's level already applies.
	seasonal, weeks := [NumQuantiles]Level{}, 0
	for _, h := range []int{how, (how + 1) % HoursPerWeek} {
		hh := t.hours.at(h)
		if hh == nil {
			continue
		}
		if h == how {
			weeks = len(hh.Median)
		}
		for q := range NumQuantiles {
			var ms, ss []float32
			for w := range hh.Median {
				ms = append(ms, hh.Median[w][q])
				ss = append(ss, hh.Spread[w][q])
			}
			m, _ := robust(ms)
			sp, _ := robust(ss)
			seasonal[q].Median = math.Max(seasonal[q].Median, m)
			seasonal[q].Spread = math.Max(seasonal[q].Spread, sp)
		}
	}
	b.Weeks = weeks
	if weeks > 0 {
		b.Source = SourceSeasonal
		// The level is the higher of now and this hour of the week; the
		// spread is the hour's own: the recent ring spans other hours
		// (and, at a compressed clock, other days), whose differences
		// are the seasonality the hour's level already accounts for.
		for q := range NumQuantiles {
			b.Q[q].Median = math.Max(b.Q[q].Median, seasonal[q].Median)
			b.Q[q].Spread = seasonal[q].Spread
		}
	}
	switch {
	case weeks >= 2:
		b.Widen = 1
	case weeks == 1:
		b.Widen = 1.5
	}
	return b
}

// Forget drops models not observed for longer than d.
func (s *Store) Forget(d time.Duration) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.tracks {
		if now.Sub(t.lastSeen) > d {
			delete(s.tracks, k)
		}
	}
}

// Info is one model's baseline and history depth, for the admin API.
type Info struct {
	Model    string    `json:"model"`
	Source   string    `json:"source"`
	Weeks    int       `json:"history_weeks"`
	Hours    int       `json:"hours_learned"`
	Recent   int       `json:"recent_samples"`
	Hour     int       `json:"hour_of_week"`
	Widen    float64   `json:"band_widen"`
	Levels   []LevelAt `json:"levels"`
	UpSince  time.Time `json:"up_since,omitzero"`
	LastSeen time.Time `json:"last_seen"`
	// Recurring are the rises that came back at the same time of day on
	// RecurringDays days or more (recurring.go).
	Recurring []Pattern `json:"recurring,omitempty"`
}

// LevelAt is one quantile's level and the default rise's threshold.
type LevelAt struct {
	Quantile  string  `json:"quantile"`
	Median    float64 `json:"median_seconds"`
	Spread    float64 `json:"spread_seconds"`
	Threshold float64 `json:"up_above_seconds"`
}

// Infos returns every model's baseline now, sorted by model.
func (s *Store) Infos() []Info {
	now := s.opts.Now()
	how := s.hourOfWeek(s.seasonal(now))
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Info, 0, len(s.tracks))
	for k, t := range s.tracks {
		b := s.get(t, how, now)
		in := Info{Model: k, Source: b.Source, Weeks: b.Weeks, Recent: b.RecentSamples, Hour: how, Widen: b.Widen, UpSince: t.upSince, LastSeen: t.lastSeen}
		in.Recurring = s.patterns(t, s.seasonal(now))
		for _, h := range t.hours.all() {
			if h != nil {
				in.Hours++
			}
		}
		for q := range NumQuantiles {
			th, _ := b.Threshold(q, DefaultRise)
			in.Levels = append(in.Levels, LevelAt{QuantileNames[q], b.Q[q].Median, b.Q[q].Spread, th.Seconds()})
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b Info) int {
		if a.Model < b.Model {
			return -1
		}
		if a.Model > b.Model {
			return 1
		}
		return 0
	})
	return out
}

// robust returns the median and 1.4826 × the median absolute deviation
// of v (microseconds) in seconds (zeros when empty); v is not modified.
func robust(v []float32) (median, spread float64) {
	if len(v) == 0 {
		return 0, 0
	}
	s := make([]float64, len(v))
	for i, x := range v {
		s[i] = float64(x) / 1e6
	}
	slices.Sort(s)
	median = mid(s)
	for i := range s {
		s[i] = math.Abs(s[i] - median)
	}
	slices.Sort(s)
	return median, 1.4826 * mid(s)
}

func mid(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// SLO is a model's latency objective per tracked quantile (P50, P90,
// P99); zero entries are unset.
type SLO [NumQuantiles]time.Duration

// OverSLO decides whether a window's total latency is, with confidence,
// over any set objective.
func OverSLO(slo SLO, rs monitor.RecentStats) Verdict {
	return above(rs, []int{P50, P90, P99}, func(q int) (time.Duration, bool) { return slo[q], slo[q] > 0 })
}
