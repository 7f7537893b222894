package proc

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// errBadProcArgs: a KERN_PROCARGS2 buffer did not parse.
var errBadProcArgs = errors.New("proc: malformed procargs")

// procArgsEnv returns the environment in a macOS KERN_PROCARGS2 buffer as
// NUL-separated KEY=VALUE strings (the shape of Linux's
// /proc/<pid>/environ), appended to buf. The buffer is argc (a 32-bit
// integer in host order, little-endian on every Mac), the executable path,
// NUL padding, argc argument strings, then the environment strings up to
// an empty one. Portable so it is tested everywhere.
func procArgsEnv(b, buf []byte) ([]byte, error) {
	buf = buf[:0]
	if len(b) < 4 {
		return buf, errBadProcArgs
	}
	argc := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	i := bytes.IndexByte(b, 0) // the executable path
	if i < 0 {
		return buf, errBadProcArgs
	}
	b = b[i:]
	for len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	for ; argc > 0; argc-- {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return buf, errBadProcArgs
		}
		b = b[i+1:]
	}
	for len(b) > 0 && b[0] != 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			i = len(b)
		}
		buf = append(append(buf, b[:i]...), 0)
		b = b[min(i+1, len(b)):]
	}
	return buf, nil
}
