//go:build !linux

package sysx

import (
	"errors"
	"syscall"
)

func tie(*syscall.SysProcAttr, syscall.Signal) {}

// pipeFill: a pipe's capacity cannot be read outside Linux (macOS grows a
// pipe's buffer from 16 KiB as it is written), so this fails there.
func pipeFill(int) (int, int, error) { return 0, 0, errors.ErrUnsupported }
