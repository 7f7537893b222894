//go:build !linux

package proc

import "os"

// awaitExit: without pidfds, Wait blocks in the kernel.
func awaitExit(*os.Process) bool { return false }
