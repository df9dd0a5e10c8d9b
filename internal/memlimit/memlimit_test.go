package memlimit

import (
	"math"
	"os"
	"testing"
	"testing/fstest"
)

func TestLimit(t *testing.T) {
	cases := []struct {
		tree   string
		want   int64
		source string
	}{
		{"v2", 1 << 30, CgroupV2},
		{"v2-max", 0, None},
		{"v2-nested", 512 << 20, CgroupV2},         // the parent's limit holds the own cgroup's "max"
		{"v2-nested-absent", 256 << 20, CgroupV2},  // the own path is not under this mount: the root file
		{"v2-nested-tighter", 128 << 20, CgroupV2}, // the least on the way up
		{"v2-garbage", 0, None},
		{"v2-above-physical", 0, None},
		{"v1", 2 << 30, CgroupV1},
		{"v1-nested", 768 << 20, CgroupV1},
		{"v1-unlimited", 0, None},
		{"v1-above-physical", 0, None},
		{"v1-garbage", 0, None},
		{"missing", 0, None},
	}
	for _, tc := range cases {
		t.Run(tc.tree, func(t *testing.T) {
			n, source, ok := limitIn(os.DirFS("testdata/" + tc.tree))
			if n != tc.want || source != tc.source || ok != (tc.want > 0) {
				t.Errorf("limit = %d, %q, %v; want %d, %q, %v", n, source, ok, tc.want, tc.source, tc.want > 0)
			}
		})
	}
}

// A /proc/self/cgroup path cannot lead the search out of /sys/fs/cgroup.
func TestLimitStaysUnderTheMount(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/self/cgroup":          {Data: []byte("0::/../../../etc\n")},
		"etc/memory.max":            {Data: []byte("4096\n")},
		"sys/fs/cgroup/memory.max":  {Data: []byte("1048576\n")},
		"sys/fs/cgroup/etc/x":       {Data: []byte("")},
		"proc/meminfo":              {Data: []byte("MemTotal: 1000000 kB\n")},
		"sys/fs/cgroup/memory/junk": {Data: []byte("")},
	}
	if n, source, ok := limitIn(fsys); n != 1<<20 || source != CgroupV2 || !ok {
		t.Errorf("limit = %d, %q, %v; want the mount's 1048576", n, source, ok)
	}
}

// Without /proc/meminfo only the 2^60 rule says "no limit".
func TestLimitWithoutMeminfo(t *testing.T) {
	fsys := fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("68719476736\n")}}
	if n, source, ok := limitIn(fsys); n != 64<<30 || source != CgroupV1 || !ok {
		t.Errorf("limit = %d, %q, %v; want 64 GiB from cgroup v1", n, source, ok)
	}
}

// fakeRuntime stands in for debug.SetMemoryLimit: tests never change the
// real process's soft limit.
type fakeRuntime struct {
	limit int64
	sets  int
}

func (f *fakeRuntime) set(n int64) int64 {
	old := f.limit
	if n >= 0 {
		f.limit = n
		f.sets++
	}
	return old
}

func TestApply(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOMEMLIMIT" {
				return v
			}
			return ""
		}
	}
	cases := []struct {
		name, tree, gomemlimit string
		runtime                int64 // the soft limit before Apply
		want                   Result
		sets                   int
		str                    string
	}{
		{"cgroup v2", "v2", "", math.MaxInt64, Result{Limit: 1 << 30, Source: CgroupV2, SoftLimit: 966367642}, 1, "1073741824(cgroup_v2,gomemlimit=966367642)"},
		{"cgroup v1", "v1", "", math.MaxInt64, Result{Limit: 2 << 30, Source: CgroupV1, SoftLimit: 1932735284}, 1, "2147483648(cgroup_v1,gomemlimit=1932735284)"},
		{"GOMEMLIMIT wins", "v2", "500MiB", 500 << 20, Result{Limit: 1 << 30, Source: Env, SoftLimit: 500 << 20}, 0, "1073741824(GOMEMLIMIT,gomemlimit=524288000)"},
		{"GOMEMLIMIT without a limit", "missing", "off", math.MaxInt64, Result{Source: Env, SoftLimit: math.MaxInt64}, 0, "none(GOMEMLIMIT,gomemlimit=none)"},
		{"no limit", "v2-max", "", math.MaxInt64, Result{Source: None, SoftLimit: math.MaxInt64}, 0, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRuntime{limit: tc.runtime}
			got := apply(os.DirFS("testdata/"+tc.tree), env(tc.gomemlimit), rt.set)
			if got != tc.want || rt.sets != tc.sets {
				t.Errorf("apply = %+v after %d sets; want %+v after %d", got, rt.sets, tc.want, tc.sets)
			}
			if got.String() != tc.str {
				t.Errorf("String() = %q, want %q", got.String(), tc.str)
			}
		})
	}
}

func TestSoftLimitDoesNotOverflow(t *testing.T) {
	if got := SoftLimit(v1Unlimited - 1); got <= 0 || got >= v1Unlimited {
		t.Errorf("SoftLimit(2^60-1) = %d", got)
	}
}

// Without a container limit or GOMEMLIMIT the soft limit follows the
// budget; with either, the budget changes nothing.
func TestFromBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Result
		want Result
		sets int
		str  string
	}{
		{"no limit", Result{Source: None, SoftLimit: math.MaxInt64}, Result{Source: Budget, SoftLimit: 192 << 20}, 1, "none(budget,gomemlimit=201326592)"},
		{"container", Result{Limit: 1 << 30, Source: CgroupV2, SoftLimit: 966367642}, Result{Limit: 1 << 30, Source: CgroupV2, SoftLimit: 966367642}, 0, "1073741824(cgroup_v2,gomemlimit=966367642)"},
		{"GOMEMLIMIT", Result{Source: Env, SoftLimit: 500 << 20}, Result{Source: Env, SoftLimit: 500 << 20}, 0, "none(GOMEMLIMIT,gomemlimit=524288000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRuntime{limit: tc.in.SoftLimit}
			got := fromBudget(tc.in, 64<<20, rt.set)
			if got != tc.want || rt.sets != tc.sets {
				t.Errorf("fromBudget = %+v after %d sets; want %+v after %d", got, rt.sets, tc.want, tc.sets)
			}
			if got.String() != tc.str {
				t.Errorf("String() = %q, want %q", got.String(), tc.str)
			}
		})
	}
}
