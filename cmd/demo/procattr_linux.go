package main

import "syscall"

// sysProcAttr puts a child in its own process group, so a Ctrl-C in the
// terminal reaches only the demo, which then stops the children in order
// (load first, then infergate, then simserver). Pdeathsig stops a child
// if the demo itself is killed outright.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
