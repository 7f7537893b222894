package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A live upgrade re-executes the daemon in place (same pid): its children
// stay its children, and their pipes survive the exec when their
// descriptors are made inheritable. Handoff prepares a child for that;
// Adopt, in the new image, rebuilds a Child around the same process and
// descriptors without starting anything.

// ErrAdopt means a handed-over child could not be adopted.
var ErrAdopt = errors.New("cannot adopt child")

// ErrChildGone means a handed-over child exited (and was reaped) before
// it could be adopted: its session is closed as after a crash.
var ErrChildGone = errors.New("handed-over child is gone")

// Handoff is what the next image needs to adopt a child: who it is (the
// identity is checked again before adopting), its process group's session
// (for the tree scan), its tags, the descriptor numbers of our ends of its
// stdin, stdout and stderr pipes (inheritable), and the stderr tail read
// so far.
type Handoff struct {
	Identity
	SID        int    `json:"sid"`
	Tags       Tags   `json:"tags"`
	Stdin      int    `json:"stdinFd"`
	Stdout     int    `json:"stdoutFd"`
	Stderr     int    `json:"stderrFd"`
	StderrTail string `json:"stderrTail,omitempty"`
}

// Handoff clears close-on-exec on the child's three pipe ends and returns
// their numbers. KeepCloseOnExec undoes it (an upgrade abandoned before the
// exec).
func (c *Child) Handoff() (Handoff, error) {
	h := Handoff{Identity: c.id, SID: c.sid, Tags: c.tags, StderrTail: c.stderr.String()}
	for _, p := range []struct {
		f   *os.File
		dst *int
	}{{c.stdin, &h.Stdin}, {c.stdout, &h.Stdout}, {c.errR, &h.Stderr}} {
		fd, err := Inheritable(p.f, true)
		if err != nil {
			c.KeepCloseOnExec()
			return Handoff{}, fmt.Errorf("child %d: %s: %w", c.id.PID, p.f.Name(), err)
		}
		*p.dst = fd
	}
	return h, nil
}

// KeepCloseOnExec sets close-on-exec again on the child's pipe ends.
func (c *Child) KeepCloseOnExec() {
	for _, f := range []*os.File{c.stdin, c.stdout, c.errR} {
		_, _ = Inheritable(f, false)
	}
}

// Inheritable clears (on) or sets (off) close-on-exec on f's descriptor,
// without switching it to blocking mode as f.Fd() would, and returns its
// number.
func Inheritable(f syscall.Conn, on bool) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var ferr error
	if err := rc.Control(func(u uintptr) {
		fd = int(u)
		flag := unix.FD_CLOEXEC
		if on {
			flag = 0
		}
		_, ferr = unix.FcntlInt(u, unix.F_SETFD, flag)
	}); err != nil {
		return -1, err
	}
	return fd, ferr
}

// Adopt rebuilds a Child in the image that follows a live upgrade: the
// process must still be h's (same start ticks and boot; it is our child,
// so nobody else can have reaped it and reused its pid), its pipe ends are
// wrapped again (close-on-exec set, non-blocking, pollable) and it is
// waited on by pid like a spawned child. Call it before SetSubreaper so
// the reaper of adopted orphans never takes its status.
//
// In cgroup mode (g set) the child's session cgroup is found again and
// watched (onLimit as at Spawn); a child outside one is stopped the
// fallback way.
func Adopt(h Handoff, g *Cgroups, onLimit func(code string), log *slog.Logger) (*Child, error) {
	r, err := newStatReader()
	if err != nil {
		return nil, fmt.Errorf("%w %d: %w", ErrAdopt, h.PID, err)
	}
	id, _, err := identityOf(r, h.PID)
	r.close()
	if err != nil || id.StartTicks != h.StartTicks || id.BootID != h.BootID {
		closeFDs(h.Stdin, h.Stdout, h.Stderr)
		return nil, fmt.Errorf("%w: pid %d (start ticks %d, want %d): %w", ErrChildGone, h.PID, id.StartTicks, h.StartTicks, err)
	}
	files := make([]*os.File, 0, 3)
	for _, fd := range []int{h.Stdin, h.Stdout, h.Stderr} {
		// A descriptor the old image failed to keep is closed, or reused by
		// whatever this image opened since: only a pipe can be the child's.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			closeAll(files...)
			return nil, fmt.Errorf("%w %d: descriptor %d is not an inherited pipe (mode %#o, %v)", ErrAdopt, h.PID, fd, st.Mode, err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
			closeAll(files...)
			return nil, fmt.Errorf("%w %d: descriptor %d: %w", ErrAdopt, h.PID, fd, err)
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			closeAll(files...)
			return nil, fmt.Errorf("%w %d: descriptor %d: %w", ErrAdopt, h.PID, fd, err)
		}
		files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("|%d", fd)))
	}
	cg, err := g.adoptCgroup(h.Tags, h.PID, onLimit)
	if err != nil {
		closeAll(files...)
		return nil, fmt.Errorf("%w %d: %w", ErrAdopt, h.PID, err)
	}
	registry.Lock()
	p, err := os.FindProcess(h.PID)
	if err == nil {
		registry.pids[h.PID] = struct{}{}
	}
	registry.Unlock()
	if err != nil {
		closeAll(files...)
		return nil, fmt.Errorf("%w %d: %w", ErrAdopt, h.PID, err)
	}
	c := &Child{
		cg:      cg,
		process: p, id: h.Identity, sid: h.SID, tags: h.Tags, stdin: files[0], stdout: files[1], errR: files[2],
		stderr: newRing(DefaultStderrBytes), exited: make(chan struct{}), log: orDiscard(log),
	}
	c.record(true)
	_, _ = io.WriteString(c.stderr, h.StderrTail)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(c.stderr, c.errR)
	}()
	go c.wait(c.errR, copied)
	return c, nil
}

// ErrOutputTooLong means a command run by Output wrote more than its limit.
var ErrOutputTooLong = errors.New("output too long")

// outputWait bounds how long Output waits for the command's pipes once it
// exited or was killed (a descendant may hold its stdout).
const outputWait = time.Second

// Output runs a short command (a new binary's `version --handoff`) in a
// process group of its own and returns its stdout, at most max bytes
// (past it: ErrOutputTooLong). When ctx ends the whole group is killed,
// and so is whatever of it is left when the command exits. It registers
// the pid like Spawn, so the subreaper's reaper leaves its exit status to
// Wait.
func Output(ctx context.Context, max int, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	out := &cappedBuffer{max: max}
	cmd.Stdout = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	cmd.WaitDelay = outputWait
	registry.Lock()
	err := cmd.Start()
	if err == nil {
		registry.pids[cmd.Process.Pid] = struct{}{}
	}
	registry.Unlock()
	if err != nil {
		return nil, err
	}
	err = cmd.Wait()
	_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL) // what the command left behind
	registry.Lock()
	delete(registry.pids, cmd.Process.Pid)
	registry.Unlock()
	if out.over {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrOutputTooLong, max)
	}
	return out.b.Bytes(), err
}

// cappedBuffer keeps up to max bytes; a write past it fails (the copy,
// and so the command's output, stops there).
type cappedBuffer struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.b.Len()+len(p) > c.max {
		c.over = true
		return 0, ErrOutputTooLong
	}
	return c.b.Write(p)
}

// closeFDs closes inherited descriptors nobody will wrap.
func closeFDs(fds ...int) {
	for _, fd := range fds {
		if fd > 2 {
			unix.Close(fd)
		}
	}
}
