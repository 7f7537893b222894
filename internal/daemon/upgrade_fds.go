package daemon

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// closeOnExecInherited marks every descriptor this image inherited
// through a live upgrade's exec close-on-exec, those the handoff names
// included (each is set so again where it is taken; none is closed
// here). A descriptor the handoff does not name (an image before this
// one leaked it, or handed over a field this binary does not read) would
// otherwise reach every child this image starts; marked, it lives on in
// this image only, until the next exec closes it.
func closeOnExecInherited() {
	dir := "/proc/self/fd"
	if runtime.GOOS == "darwin" {
		dir = "/dev/fd"
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
