package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair is a listener's accepted end (the "daemon") and the proxy's dialled end.
func pair(t *testing.T) (daemon, proxy *net.UnixConn) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p, err := net.DialUnix("unix", nil, l.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, p
}

// TestPipeHalfClose: the client's EOF reaches the daemon as EOF while
// the daemon's answer written after it (8 MiB, many copies' worth) still
// reaches stdout whole, then stdout closes and pipe returns nil (exit 0).
func TestPipeHalfClose(t *testing.T) {
	d, p := pair(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	res := make(chan error, 1)
	go func() { res <- pipe(p, inR, outW) }()
	go func() {
		io.WriteString(inW, "question")
		inW.Close()
	}()
	got, err := io.ReadAll(d) // to the client's EOF
	if err != nil || string(got) != "question" {
		t.Fatalf("daemon read %q, %v", got, err)
	}
	answer := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(outR)
		answer <- b
	}()
	want := bytes.Repeat([]byte("answer after the client's EOF\n"), 8<<20/30)
	go func() {
		d.Write(want)
		d.Close()
	}()
	if b := <-answer; !bytes.Equal(b, want) {
		t.Fatalf("stdout got %d bytes, want %d", len(b), len(want))
	}
	if err := <-res; err != nil {
		t.Fatalf("pipe: %v, want nil (the client closed)", err)
	}
}

// TestPipeDaemonCloses: the daemon's EOF first closes stdout and is
// ErrDaemonClosed (exit 1); a stdin read still blocked ends when the
// client's side closes.
func TestPipeDaemonCloses(t *testing.T) {
	d, p := pair(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	res := make(chan error, 1)
	go func() { res <- pipe(p, inR, outW) }()
	d.Close()
	if b, err := io.ReadAll(outR); err != nil || len(b) != 0 {
		t.Fatalf("stdout: %q, %v", b, err)
	}
	if err := <-res; !errors.Is(err, ErrDaemonClosed) {
		t.Fatalf("pipe: %v, want ErrDaemonClosed", err)
	}
	inW.Close()
}
