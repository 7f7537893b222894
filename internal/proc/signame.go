package proc

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is the conventional name of a signal ("SIGKILL").
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}
