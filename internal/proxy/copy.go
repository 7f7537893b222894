package proxy

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
)

// Why a copy ended.
var (
	// ErrDaemonClosed: the daemon closed the connection while the client
	// still had its side open.
	ErrDaemonClosed = errors.New("the daemon closed the connection")
)

// copyBuffer is each direction's buffer: an attach or read page of up to
// 1 MiB moves in a few reads and writes, not 32 (io.Copy's 32 KiB).
const copyBuffer = 256 << 10

// onlyReader hides a reader's WriterTo, so CopyBuffer uses our buffer.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// writeErr marks an error of writing to the client (stdout): the client
// went away, which ends the proxy as its EOF does.
type writeErr struct{ err error }

func (w *writeErr) Error() string { return "stdout: " + w.err.Error() }
func (w *writeErr) Unwrap() error { return w.err }

// clientWriter tags stdout's write errors as writeErr.
type clientWriter struct{ w io.Writer }

func (c clientWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		err = &writeErr{err}
	}
	return n, err
}

// pipe copies stdin to conn and conn to stdout until one side is done and
// returns nil when the client closed (stdin EOF, or stdout gone),
// ErrDaemonClosed when the daemon did first, or the copy's error.
//
// The client's EOF shuts down conn's write side only: the daemon still
// answers what it read, and stdout is closed after conn's last byte was
// copied to it (then the daemon closes too). The daemon's EOF closes stdout
// at once; a read of stdin still blocked then is left to the process's exit.
func pipe(conn *net.UnixConn, stdin io.Reader, stdout io.WriteCloser) error {
	up := make(chan error, 1)
	down := make(chan error, 1)
	// Set before the write shutdown, so before the daemon can see it and
	// close: a daemon EOF with it set is the end of the client's close.
	var clientEOF atomic.Bool
	go func() {
		_, err := io.CopyBuffer(conn, onlyReader{stdin}, make([]byte, copyBuffer))
		if err == nil {
			clientEOF.Store(true)
			err = conn.CloseWrite()
		}
		up <- err
	}()
	go func() {
		_, err := io.CopyBuffer(clientWriter{stdout}, onlyReader{conn}, make([]byte, copyBuffer))
		down <- err
	}()
	defer conn.Close()
	select {
	case err := <-up:
		// The client is done sending (or the daemon stopped reading):
		// everything the daemon still writes goes out before stdout closes.
		derr := <-down
		stdout.Close()
		var we *writeErr
		switch {
		case derr != nil && !errors.As(derr, &we):
			return derr
		case err != nil && !errors.As(derr, &we):
			return err
		}
		return nil
	case derr := <-down:
		stdout.Close()
		var we *writeErr
		if errors.As(derr, &we) || clientEOF.Load() {
			return nil
		}
		if derr != nil {
			return derr
		}
		return ErrDaemonClosed
	}
}
