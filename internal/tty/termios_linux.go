package tty

import "golang.org/x/sys/unix"

// getTermios is the ioctl that reads a terminal's settings (TCGETS,
// ioctl_tty(2)); it fails on anything but a terminal.
const getTermios = unix.TCGETS
