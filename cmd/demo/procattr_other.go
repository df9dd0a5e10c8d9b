//go:build unix && !linux

package main

import "syscall"

// sysProcAttr puts a child in its own process group, so a Ctrl-C in the
// terminal reaches only the demo, which then stops the children in order.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
