//go:build !unix

package childproc

import (
	"os"
	"syscall"
)

// procAttr leaves the defaults where there are no process groups.
func procAttr(bool) *syscall.SysProcAttr { return nil }

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
