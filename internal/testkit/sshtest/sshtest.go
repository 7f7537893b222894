// Package sshtest runs a real OpenSSH server on 127.0.0.1 for tests of
// `sessiond proxy` over ssh: a free port, a host key and a client key made
// in a temp dir, the client key authorized, and an ssh_config naming the
// server as host Host (StrictHostKeyChecking off, known hosts in the temp
// dir). Sessions on the server get the environment the test gives
// (SetEnv: a PATH that finds the built sessiond, its socket).
//
// Debian's openssh-server is installed when sshd is missing (Install,
// also `go run ./internal/testkit/sshtest/install`, which `make test`
// runs); a test fails with the install command when that is impossible,
// it is never skipped.
package sshtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/sysx"
)

// Sshd is where Debian's openssh-server puts the server.
const Sshd = "/usr/sbin/sshd"

// Host is the name the ssh_config gives the test server.
const Host = "sessiond-test"

// InstallCommand is what Install runs (as root).
const InstallCommand = "apt-get install -y openssh-server"

// Install installs openssh-server when sshd is missing.
func Install() error {
	if _, err := os.Stat(Sshd); err == nil {
		return nil
	}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	out, err := run("apt-get", "install", "-y", "openssh-server")
	if err != nil {
		// A fresh image has no package lists yet.
		if _, uerr := run("apt-get", "update"); uerr == nil {
			out, err = run("apt-get", "install", "-y", "openssh-server")
		}
	}
	if err != nil {
		return fmt.Errorf("sshd (%s) is missing and `%s` failed (run it as root): %w\n%s", Sshd, InstallCommand, err, out)
	}
	if _, err := os.Stat(Sshd); err != nil {
		return fmt.Errorf("`%s` left no %s: %w", InstallCommand, Sshd, err)
	}
	return nil
}

// Server is a running sshd.
type Server struct {
	Dir    string // keys, configs, known_hosts
	Config string // the client's ssh_config (Host names the server)
	// BinDir holds an `ssh` that is ssh -F Config: put it first in PATH
	// and `ssh Host …` reaches the server.
	BinDir string
	Port   int
	Cmd    *exec.Cmd
	done   chan struct{} // closed when sshd's stderr is drained
}

// Start runs sshd (Run) and stops it in t.Cleanup.
func Start(t testing.TB, sessiond string, env ...string) *Server {
	t.Helper()
	s, err := Run(sessiond, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Run installs sshd if missing and runs it; env is what sessions on it
// get (KEY=value), sessiond the binary they find on PATH as `sessiond`.
// sshd dies with the thread that started it (sysx.Tie) or Close.
func Run(sessiond string, env ...string) (s *Server, err error) {
	if err := Install(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sdssh") // short, and StrictModes is off anyway
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	s = &Server{Dir: dir, Config: filepath.Join(dir, "ssh_config"), BinDir: filepath.Join(dir, "bin"), done: make(chan struct{})}
	for _, name := range []string{"host_key", "id"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, name)).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %w\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "id.pub"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		return nil, err
	}
	remoteBin := filepath.Join(dir, "remote-bin")
	if err := os.MkdirAll(remoteBin, 0o755); err != nil {
		return nil, err
	}
	if err := os.Symlink(sessiond, filepath.Join(remoteBin, "sessiond")); err != nil {
		return nil, err
	}
	// /run/sshd: the privilege separation directory sshd insists on.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	if s.Port, err = freePort(); err != nil {
		return nil, err
	}
	setenv := []string{"PATH=" + remoteBin + ":/usr/local/bin:/usr/bin:/bin"}
	setenv = append(setenv, env...)
	quoted := make([]string, len(setenv))
	for i, kv := range setenv {
		quoted[i] = strconv.Quote(kv)
	}
	sshdConfig := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(sshdConfig, []byte(strings.Join([]string{
		"Port " + strconv.Itoa(s.Port),
		"ListenAddress 127.0.0.1",
		"HostKey " + filepath.Join(dir, "host_key"),
		"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
		"PidFile none",
		"StrictModes no",
		"UsePAM no",
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PrintMotd no",
		"SetEnv " + strings.Join(quoted, " "),
		"LogLevel INFO",
		"",
	}, "\n")), 0o600); err != nil {
		return nil, err
	}
	u := os.Getenv("USER")
	if u == "" {
		u = "root"
	}
	if err := os.WriteFile(s.Config, []byte(strings.Join([]string{
		"Host " + Host,
		"  HostName 127.0.0.1",
		"  Port " + strconv.Itoa(s.Port),
		"  User " + u,
		"  IdentityFile " + filepath.Join(dir, "id"),
		"  IdentitiesOnly yes",
		"  StrictHostKeyChecking no",
		"  UserKnownHostsFile " + filepath.Join(dir, "known_hosts"),
		"  BatchMode yes",
		"  LogLevel ERROR",
		"",
	}, "\n")), 0o600); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.BinDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.BinDir, "ssh"),
		[]byte("#!/bin/sh\nexec /usr/bin/ssh -F "+s.Config+" \"$@\"\n"), 0o755); err != nil {
		return nil, err
	}

	s.Cmd = exec.Command(Sshd, "-D", "-e", "-f", sshdConfig)
	sysx.Tie(s.Cmd, syscall.SIGKILL)
	stderr, err := s.Cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.Cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	var log strings.Builder
	go func() {
		defer close(s.done)
		listening := false
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if !listening && strings.Contains(line, "Server listening on") {
				listening = true
				close(ready)
			} else if !listening {
				log.WriteString(line + "\n")
			}
		}
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		s.Cmd.Wait()
		return nil, fmt.Errorf("sshd exited before listening:\n%s", log.String()) // done: log is no longer written
	case <-time.After(30 * time.Second):
		s.Close()
		return nil, fmt.Errorf("sshd did not listen within 30 s")
	}
}

// Close stops sshd and removes its dir.
func (s *Server) Close() {
	s.Cmd.Process.Kill()
	<-s.done
	s.Cmd.Wait()
	os.RemoveAll(s.Dir)
}

// Env is os.Environ with s.BinDir first in PATH.
func (s *Server) Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			env = append(env, "PATH="+s.BinDir+":"+p)
		} else {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
