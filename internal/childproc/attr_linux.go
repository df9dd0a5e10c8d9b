package childproc

import "syscall"

// procAttr puts the child in its own process group, so a Ctrl-C in a
// terminal reaches only the parent, which stops its children in its own
// order; parentDeath makes the kernel send the child SIGTERM if the
// parent is killed outright.
func procAttr(parentDeath bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if parentDeath {
		a.Pdeathsig = syscall.SIGTERM
	}
	return a
}

// killGroup kills the child's process group, what it forked included.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
