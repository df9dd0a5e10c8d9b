// Package memlimit knows the container's memory limit (cgroup v2's
// memory.max, or cgroup v1's memory.limit_in_bytes) and sets Go's soft
// memory limit below it, so that the garbage collector works harder
// before the kernel's OOM killer ends the process.
package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// Sources of a limit, as Result.Source and Limit name them.
const (
	CgroupV2 = "cgroup v2"
	CgroupV1 = "cgroup v1"
	Env      = "GOMEMLIMIT"
	None     = "none"
	// Budget: no container limit and no GOMEMLIMIT; the soft limit
	// follows the memory budget (FromBudget).
	Budget = "budget"
)

// v1Unlimited is the least cgroup v1 value that means "no limit": the
// kernel writes the largest page-aligned int64 (9223372036854771712).
const v1Unlimited = 1 << 60

// root is the file system Limit reads: the machine's, or a testdata tree.
var root fs.FS = os.DirFS("/")

// Limit returns the memory limit of the cgroup this process runs in, in
// bytes, and where it was read (CgroupV2 or CgroupV1). ok is false, and
// source None, when there is none: no cgroup files, "max", a v1 value of
// 2^60 or more, a value above the machine's memory, or a file that
// cannot be read as a number.
//
// A cgroup v2 limit is the least memory.max from the process's own cgroup
// (the 0:: line of /proc/self/cgroup) up to /sys/fs/cgroup, since any
// ancestor's limit holds too; in a container with its own cgroup
// namespace that is /sys/fs/cgroup/memory.max. cgroup v1 is read the same
// way from its memory controller, when no cgroup v2 file is there.
func Limit() (bytes int64, source string, ok bool) { return limitIn(root) }

func limitIn(fsys fs.FS) (int64, string, bool) {
	v2, v1 := ownCgroups(fsys)
	physical := memTotal(fsys)
	within := func(parse func(string) (int64, bool)) func(string) (int64, bool) {
		return func(s string) (int64, bool) {
			n, ok := parse(s)
			return n, ok && (physical == 0 || n <= physical)
		}
	}
	n, found, ok := leastUp(fsys, "sys/fs/cgroup", v2, "memory.max", within(parseV2))
	source := CgroupV2
	if !found {
		n, _, ok = leastUp(fsys, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", within(parseV1))
		source = CgroupV1
	}
	if !ok {
		return 0, None, false
	}
	return n, source, true
}

// leastUp reads file in the cgroup dir rel under base and in each of its
// parents up to base, and returns the least limit among them. found says
// whether any of those files exists (then the hierarchy is this one);
// ok whether any holds a limit.
func leastUp(fsys fs.FS, base, rel, file string, parse func(string) (int64, bool)) (least int64, found, ok bool) {
	dir := path.Join(base, rel)
	if !fs.ValidPath(dir) || !strings.HasPrefix(dir+"/", base+"/") {
		dir = base
	}
	for {
		if b, err := fs.ReadFile(fsys, path.Join(dir, file)); err == nil {
			found = true
			if n, limited := parse(string(bytes.TrimSpace(b))); limited && (!ok || n < least) {
				least, ok = n, true
			}
		}
		if dir == base {
			return least, found, ok
		}
		dir = path.Dir(dir)
	}
}

// parseV2 reads memory.max: a byte count, or "max" for none.
func parseV2(s string) (int64, bool) {
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// parseV1 reads memory.limit_in_bytes: a byte count; 2^60 or more is none.
func parseV1(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0 && n < v1Unlimited
}

// ownCgroups returns the process's cgroup paths from /proc/self/cgroup:
// the unified (v2, "0::/path") one and the v1 memory controller's
// ("N:memory:/path"), relative ("" for the root, or when not there).
func ownCgroups(fsys fs.FS) (v2, v1 string) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok1 := strings.Cut(sc.Text(), ":")
		controllers, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			continue
		}
		p = strings.TrimPrefix(path.Clean("/"+p), "/")
		switch {
		case id == "0" && controllers == "":
			v2 = p
		case hasController(controllers, "memory"):
			v1 = p
		}
	}
	return v2, v1
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// memTotal returns the machine's memory from /proc/meminfo, 0 if unknown.
func memTotal(fsys fs.FS) int64 {
	b, err := fs.ReadFile(fsys, "proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 && kb < math.MaxInt64>>10 {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// Result is what Apply found and did.
type Result struct {
	// Limit is the container's memory limit in bytes; 0 when there is none.
	Limit int64
	// Source is what set Go's soft memory limit: CgroupV2 or CgroupV1
	// (Apply set it from Limit), Env (the GOMEMLIMIT variable, left as
	// the runtime read it) or None (left unset).
	Source string
	// SoftLimit is Go's soft memory limit after Apply, in bytes;
	// math.MaxInt64 means none.
	SoftLimit int64
}

// Apply sets Go's soft memory limit to 90% of the container's memory
// limit, unless the GOMEMLIMIT environment variable is set (then the
// runtime has applied it already and it stands) or there is no limit.
// The 10% left is for what the collector does not count (stacks of
// threads outside Go, the kernel's socket buffers) and its own lag.
func Apply() Result { return apply(root, os.Getenv, debug.SetMemoryLimit) }

func apply(fsys fs.FS, getenv func(string) string, setLimit func(int64) int64) Result {
	limit, source, ok := limitIn(fsys)
	r := Result{Source: None}
	if ok {
		r.Limit = limit
	}
	switch {
	case getenv("GOMEMLIMIT") != "":
		r.Source = Env
	case ok:
		r.Source = source
		setLimit(SoftLimit(limit))
	}
	r.SoftLimit = setLimit(-1) // a negative value reads the limit
	return r
}

// SoftLimit is the soft memory limit Apply sets for a container limit:
// 90% of it.
func SoftLimit(limit int64) int64 { return limit - limit/10 }

// BudgetSoftLimit is the soft memory limit of a process without a
// container limit: three times its memory budget (192 MiB for the default
// 64 MiB). The budget bounds the bytes held for calls; what bounds the
// garbage they leave is the collector's target, which without a limit is
// twice the live heap, whatever it is: 100 callers streaming 4 MiB
// uploads took such a process past 270 MiB of RSS with 90 MiB live. In a
// container the limit's 90% is 3.6 budgets (the budget is a quarter of
// the limit); this is about the same.
func BudgetSoftLimit(budget int64) int64 { return 3 * budget }

// FromBudget sets Go's soft memory limit from the memory budget when
// Apply found no container limit and GOMEMLIMIT is not set, and returns
// r as it is then; otherwise it returns r unchanged.
func FromBudget(r Result, budget int64) Result { return fromBudget(r, budget, debug.SetMemoryLimit) }

func fromBudget(r Result, budget int64, setLimit func(int64) int64) Result {
	if r.Source != None || r.Limit > 0 || budget <= 0 {
		return r
	}
	setLimit(BudgetSoftLimit(budget))
	r.Source = Budget
	r.SoftLimit = setLimit(-1)
	return r
}

// String is the result as the start line shows it, without spaces:
// "1073741824(cgroup_v2,gomemlimit=966367642)", or "none" when there is
// no limit and GOMEMLIMIT is not set.
func (r Result) String() string {
	if r.Limit == 0 && r.Source == None {
		return "none"
	}
	limit, soft := "none", "none"
	if r.Limit > 0 {
		limit = strconv.FormatInt(r.Limit, 10)
	}
	if r.SoftLimit > 0 && r.SoftLimit < math.MaxInt64 {
		soft = strconv.FormatInt(r.SoftLimit, 10)
	}
	return fmt.Sprintf("%s(%s,gomemlimit=%s)", limit, strings.ReplaceAll(r.Source, " ", "_"), soft)
}
