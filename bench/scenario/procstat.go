package scenario

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procStatusField returns one "N kB" field of /proc/PID/status (VmRSS,
// VmHWM) in bytes.
func procStatusField(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("proc: %w", err)
	}
	defer f.Close()
	return parseStatusField(f, field)
}

func parseStatusField(r io.Reader, field string) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc: %s line %q: want N kB", field, sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc: %s line %q: %w", field, sc.Text(), err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("proc: %w", err)
	}
	return 0, fmt.Errorf("proc: no %s line (process gone?)", field)
}

// resetHWM makes VmHWM of pid start again from its current RSS (Linux:
// "5" written to /proc/PID/clear_refs), so that it reads the peak of what
// follows.
func resetHWM(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("proc: reset peak RSS: %w", err)
	}
	return nil
}

// childPids lists the processes whose parent is ppid (nginx's workers
// under its master), read from /proc/*/stat.
func childPids(ppid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if p, ok := parseStatPpid(string(data)); ok && p == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// parseStatPpid reads the parent pid, the 4th field of /proc/PID/stat,
// after the command name in parentheses (which may hold spaces).
func parseStatPpid(stat string) (int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	p, err := strconv.Atoi(f[1])
	return p, err == nil
}

// rssSampler sums the VmRSS of pids() every interval and keeps the peak
// of the sums, until stop.
type rssSampler struct {
	pids     func() []int
	interval time.Duration

	done chan struct{}
	wg   sync.WaitGroup

	// Written by the sampling goroutine, read after stop.
	peak    int64
	samples int
	procs   int // processes counted in the last sample with any
}

// sumRSS is the summed VmRSS of pids and how many could be read.
func sumRSS(pids []int) (sum int64, n int) {
	for _, pid := range pids {
		if rss, err := procStatusField(pid, "VmRSS"); err == nil {
			sum += rss
			n++
		}
	}
	return sum, n
}

func startRSSSampler(pids func() []int, interval time.Duration) *rssSampler {
	s := &rssSampler{pids: pids, interval: interval, done: make(chan struct{})}
	s.sample()
	s.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.sample()
			}
		}
	})
	return s
}

func (s *rssSampler) sample() {
	sum, n := sumRSS(s.pids())
	if n == 0 {
		return
	}
	s.samples++
	s.procs = n
	s.peak = max(s.peak, sum)
}

// stop takes a last sample and ends the sampling.
func (s *rssSampler) stop() {
	close(s.done)
	s.wg.Wait()
	s.sample()
}
