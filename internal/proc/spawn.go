package proc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultStderrBytes is the stderr tail kept when Spec.StderrBytes is 0.
const DefaultStderrBytes = 8 << 10

// stderrLinger bounds how long a child's exit waits for its stderr pipe to
// reach EOF (a surviving descendant may hold it open).
const stderrLinger = 100 * time.Millisecond

// Spec describes a provider child.
type Spec struct {
	Path        string
	Args        []string // argv[1:]
	Env         []string // the child's environment; nil means os.Environ(); tags are appended
	Dir         string
	Tags        Tags
	StderrBytes int          // size of the stderr tail ring; 0 means DefaultStderrBytes
	Logger      *slog.Logger // ladder steps are logged here; nil discards
	// Cgroups, when set (cgroup mode), spawns the child directly into a
	// cgroup of its own under it, named from Tags' owner (session or
	// runtime id) and fence.
	Cgroups *Cgroups
	// OnLimit is called (from the watcher's goroutine) with LimitMemory or
	// LimitPids each time the cgroup's limit is hit (an OOM kill, a
	// refused fork).
	OnLimit func(code string)
}

// Child is a started provider process that we wait on.
type Child struct {
	cmd     *exec.Cmd   // nil for a child adopted after a live upgrade (adopt.go)
	process *os.Process // cmd.Process, or the adopted child found by pid
	errR    *os.File    // stderr's read end (handed over by a live upgrade)
	id      Identity
	sid     int // session id of the child's process group
	tags    Tags
	log     *slog.Logger
	stdin   *os.File
	stdout  *os.File
	stderr  *ring
	cg      *sessionCgroup // cgroup mode: the child's cgroup

	recMu sync.Mutex
	rec   map[int]Identity // descendants the recorder saw (recorder.go)

	exited chan struct{}
	exit   Exit // written before exited is closed
}

// registry holds the pids started through exec.Cmd that are not yet waited
// for; the subreaper never reaps them (that would steal Wait's status).
// mu is held across Start so a child cannot exit unregistered.
var registry = struct {
	sync.Mutex
	pids map[int]struct{}
}{pids: map[int]struct{}{}}

// Spawn starts the child in its own process group with stdin/stdout pipes,
// stderr into a bounded ring and the env tags appended. Its exit is learned
// from Wait by a goroutine started before Spawn returns; Exited() closes
// after Wait returned (and stderr reached EOF or lingered stderrLinger).
func Spawn(spec Spec) (*Child, error) {
	if spec.StderrBytes <= 0 {
		spec.StderrBytes = DefaultStderrBytes
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: stdin pipe: %w", ErrSpawn, spec.Path, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("%w: %s: stdout pipe: %w", ErrSpawn, spec.Path, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("%w: %s: stderr pipe: %w", ErrSpawn, spec.Path, err)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = childEnv(spec.Env, spec.Tags)
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cg, cgf, err := spec.intoCgroup(cmd.SysProcAttr)
	if err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("%w: %s: %w", ErrSpawn, spec.Path, err)
	}

	registry.Lock()
	err = cmd.Start()
	if err == nil {
		registry.pids[cmd.Process.Pid] = struct{}{}
	}
	registry.Unlock()
	closeAll(inR, outW, errW) // the child's ends
	if cgf != nil {
		cgf.Close()
	}
	if err != nil {
		closeAll(inW, outR, errR)
		if cg != nil {
			cg.remove()
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrSpawn, spec.Path, err)
	}
	if cg != nil {
		cg.arm()
	}
	c := &Child{
		cg:  cg,
		cmd: cmd, process: cmd.Process, errR: errR, tags: spec.Tags, stdin: inW, stdout: outR,
		stderr: newRing(spec.StderrBytes), exited: make(chan struct{}),
		log: orDiscard(spec.Logger),
	}
	// Not yet waited for: the pid cannot be reused, so its stat is its own.
	r, rerr := newStatReader()
	if rerr == nil {
		var st statInfo
		c.id, st, rerr = identityOf(r, cmd.Process.Pid)
		c.sid = st.SID
		r.close()
	}
	if rerr != nil {
		c.id = Identity{PID: cmd.Process.Pid}
	}
	c.record(true)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(c.stderr, errR)
	}()
	go c.wait(errR, copied)
	return c, nil
}

func (c *Child) wait(errR *os.File, copied <-chan struct{}) {
	var ps *os.ProcessState
	var err error
	awaitExit(c.process) // no thread parked in waitid per child
	if c.cmd != nil {
		err = c.cmd.Wait()
		ps = c.cmd.ProcessState
	} else {
		ps, err = c.process.Wait()
	}
	registry.Lock()
	delete(registry.pids, c.process.Pid)
	registry.Unlock()
	c.record(false)
	c.exit = exitOf(ps)
	if ps == nil {
		// Wait failed without a status (only if someone else reaped it)
		c.log.Warn("wait failed", "pid", c.id.PID, c.tags.attr(), "err", err)
	}
	// A descendant may still hold stderr: give the copier a bounded linger.
	errR.SetReadDeadline(time.Now().Add(stderrLinger))
	<-copied
	errR.Close()
	close(c.exited)
}

func exitOf(ps *os.ProcessState) Exit {
	if ps == nil {
		return Exit{}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Exit{Signal: signalName(ws.Signal())}
	}
	code := ps.ExitCode()
	if code < 0 {
		return Exit{}
	}
	return Exit{Code: &code}
}

func childEnv(base []string, t Tags) []string {
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+3)
	for _, kv := range base {
		if strings.HasPrefix(kv, EnvSessionID+"=") || strings.HasPrefix(kv, EnvFence+"=") ||
			strings.HasPrefix(kv, EnvStateID+"=") || strings.HasPrefix(kv, EnvRuntimeID+"=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, t.Env()...)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// Identity is the child's identity, read right after start.
func (c *Child) Identity() Identity { return c.id }

// Tags are the env tags the child was started with.
func (c *Child) Tags() Tags { return c.tags }

// Stdin is the write end of the child's stdin; closing it is the graceful stop.
func (c *Child) Stdin() io.WriteCloser { return c.stdin }

// Stdout is the read end of the child's stdout; it stays readable after the
// child exits until EOF. The caller closes it.
func (c *Child) Stdout() io.ReadCloser { return c.stdout }

// Exited is closed after Wait returned.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Exit is how the child ended; valid after Exited is closed.
func (c *Child) Exit() Exit {
	select {
	case <-c.exited:
		return c.exit
	default:
		return Exit{}
	}
}

// StderrTail is the last StderrBytes the child wrote to stderr.
func (c *Child) StderrTail() string { return c.stderr.String() }

// isClosed reports a close of an already closed stdin.
func isClosed(err error) bool { return errors.Is(err, os.ErrClosed) }

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
