package alert

import (
	"fmt"
	"strings"
	"time"
)

// schedule is a compiled ScheduleConfig.
type schedule struct {
	loc        *time.Location
	days       [7]bool // by time.Weekday
	start, end int     // minutes of the day
}

var weekdayNames = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

func (s ScheduleConfig) compile() (*schedule, error) {
	if s.Name == "" {
		return nil, fmt.Errorf("name: missing")
	}
	sc := &schedule{loc: time.UTC}
	if s.TimeZone != "" {
		loc, err := time.LoadLocation(s.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("time_zone: %v", err)
		}
		sc.loc = loc
	}
	if len(s.Weekdays) == 0 {
		return nil, fmt.Errorf("weekdays: missing (e.g. [monday, tuesday, wednesday, thursday, friday])")
	}
	for _, d := range s.Weekdays {
		wd, ok := weekdayNames[strings.ToLower(d)]
		if !ok {
			return nil, fmt.Errorf("weekdays: %q is not a weekday", d)
		}
		sc.days[wd] = true
	}
	var err error
	if sc.start, err = clockMinutes(s.Start); err != nil {
		return nil, fmt.Errorf("start: %v", err)
	}
	if sc.end, err = clockMinutes(s.End); err != nil {
		return nil, fmt.Errorf("end: %v", err)
	}
	if sc.end <= sc.start {
		return nil, fmt.Errorf("end: %s is not after start %s", s.End, s.Start)
	}
	return sc, nil
}

// clockMinutes reads "HH:MM" (24:00 allowed as the end of the day).
func clockMinutes(s string) (int, error) {
	var h, m int
	if _, err := fmt.Sscanf(s, "%d:%d", &h, &m); err != nil || h < 0 || h > 24 || m < 0 || m > 59 || (h == 24 && m != 0) {
		return 0, fmt.Errorf("%q is not a time like 09:00", s)
	}
	return h*60 + m, nil
}

// active reports whether t falls in the schedule.
func (s *schedule) active(t time.Time) bool {
	t = t.In(s.loc)
	m := t.Hour()*60 + t.Minute()
	return s.days[t.Weekday()] && m >= s.start && m < s.end
}
