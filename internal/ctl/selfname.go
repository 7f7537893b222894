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

// hintSocket is " --socket S" (S shell-quoted) when ctl was given
// --socket, so that a pasted ctl or serve hint reaches the same daemon;
// "" otherwise: a socket from $SESSIOND_SOCKET is in the environment of
// the shell the hint is pasted into, and the default needs nothing. ctl
// sets it from its flags before it prints anything.
var hintSocket string

// selfCtl is how a hint starts a ctl command: this binary, `ctl`, and the
// --socket ctl was given.
func selfCtl() string { return self() + " ctl" + hintSocket }

// selfServe is how a hint starts a daemon on the socket ctl was given
// (and on the state directory `ctl doctor --state-dir` inspected).
func selfServe() string {
	s := self() + " serve" + hintSocket
	if doctorStateDir != "" {
		s += " --state-dir " + shellWord(doctorStateDir)
	}
	return s
}
