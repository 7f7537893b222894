package ctl

import (
	"os"
	"os/exec"
	"sync"
)

// self is how ctl's hints name this binary, so that a pasted hint runs
// the binary that printed it: "sessiond" when PATH finds this very file
// under that name, else its absolute path, shell-quoted (`bin/sessiond`
// run from a checkout prints /home/…/bin/sessiond, not a `sessiond` the
// shell cannot find). Worked out once per process.
var self = sync.OnceValue(func() string { return selfName(os.Executable, exec.LookPath) })

// selfName is self with its lookups passed in.
func selfName(executable func() (string, error), lookPath func(string) (string, error)) string {
	exe, err := executable()
	if err != nil {
		return "sessiond"
	}
	if p, err := lookPath("sessiond"); err == nil {
		a, errA := os.Stat(p)
		b, errB := os.Stat(exe)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return "sessiond"
		}
	}
	return shellWord(exe)
}
