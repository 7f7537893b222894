package acpagents_test

import "syscall"

// groupAttr starts an agent in a process group of its own that the kernel
// kills when the test process dies.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
