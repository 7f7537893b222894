package attention

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// standIn writes a caffeinate that reports its pid and argv on the
// fifo, then sleeps: macOS's cannot run here.
func standIn(t *testing.T) (cmd, fifo string) {
	t.Helper()
	dir := t.TempDir()
	fifo = filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = filepath.Join(dir, "caffeinate")
	script := "#!/bin/sh\necho \"$$ $*\" > " + fifo + "\nexec sleep 600\n"
	if err := os.WriteFile(cmd, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return cmd, fifo
}

// readPid blocks until the stand-in has written its line.
func readPid(t *testing.T, fifo string) (int, string) {
	t.Helper()
	f, err := os.Open(fifo) // blocks until the stand-in opens it
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, args, _ := strings.Cut(strings.TrimSpace(line), " ")
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatalf("stand-in wrote %q", line)
	}
	return n, args
}

// TestCaffeinateEndsWithThePipe: caffeinate runs with -i -w <our pid>
// and is gone (killed and reaped by its sh) once Close returns; and when
// the daemon's end of the pipe closes without Close (what exec and death
// do), sh ends it just the same.
func TestCaffeinateEndsWithThePipe(t *testing.T) {
	cmd, fifo := standIn(t)
	c := Caffeinate{Command: cmd}
	if err := c.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	in, err := c.Inhibit(context.Background(), "1 agent turn(s) running")
	if err != nil {
		t.Fatal(err)
	}
	pid, args := readPid(t, fifo)
	if args != "-i -w "+strconv.Itoa(os.Getpid()) {
		t.Fatalf("caffeinate %s, want -i -w %d", args, os.Getpid())
	}
	if err := in.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Fatalf("caffeinate %d still there after Close (kill 0: %v)", pid, err)
	}

	in, err = c.Inhibit(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ = readPid(t, fifo)
	cf := in.(*caffeinated)
	cf.w.Close() // as exec (close-on-exec) or the kernel at death would
	if err := cf.cmd.Wait(); err != nil {
		t.Fatalf("sh: %v", err)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Fatalf("caffeinate %d outlived the pipe (kill 0: %v)", pid, err)
	}
}

// TestCaffeinateMissing: no caffeinate is ErrUnavailable.
func TestCaffeinateMissing(t *testing.T) {
	c := Caffeinate{Command: filepath.Join(t.TempDir(), "caffeinate")}
	if err := c.Probe(context.Background()); err == nil {
		t.Fatal("Probe found a missing caffeinate")
	}
	if _, err := c.Inhibit(context.Background(), ""); err == nil {
		t.Fatal("Inhibit ran a missing caffeinate")
	}
}
