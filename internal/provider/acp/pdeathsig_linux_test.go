package acp

import (
	"os/exec"
	"syscall"
)

// dieWithTest: the fake agent is killed when the test process dies (it
// also exits on its stdin's EOF).
func dieWithTest(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
