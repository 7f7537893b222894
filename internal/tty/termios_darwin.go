package tty

import "golang.org/x/sys/unix"

// getTermios is the ioctl that reads a terminal's settings (TIOCGETA,
// tty(4)); it fails on anything but a terminal.
const getTermios = unix.TIOCGETA
