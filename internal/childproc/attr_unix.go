//go:build unix && !linux

package childproc

import "syscall"

// procAttr puts the child in its own process group (see attr_linux.go);
// only Linux has a parent-death signal.
func procAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
