//go:build !unix

package main

import "syscall"

// sysProcAttr leaves the defaults where there are no process groups.
func sysProcAttr() *syscall.SysProcAttr { return nil }
