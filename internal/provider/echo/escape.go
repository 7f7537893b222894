package echo

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// escapeFlag is the hidden flag of an /escape descendant's stages.
const escapeFlag = "--escape-stage"

// maxForkbomb bounds /forkbomb N: a test of a pids limit, not a weapon.
const maxForkbomb = 4096

// spawnEscape starts stage 1 of an /escape descendant and returns the pid
// of stage 2, the process that stays (0 when it could not be started).
// Stage 1 runs in a new session with stdio on /dev/null and an empty
// environment (no session tags), starts stage 2 the same way and exits, so
// stage 2 is no descendant of ours: only a cgroup still knows it is ours.
func (s *server) spawnEscape(cgmove string) int {
	args := append(append([]string{}, os.Args[1:]...), escapeFlag+"=1")
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Env = []string{}
	if cgmove != "" {
		cmd.Args = append(cmd.Args, cgmoveFlag+"="+cgmove)
		if cgmove == "root" {
			cmd.Env = os.Environ() // a tagged escapee
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.Output()
	if err != nil {
		s.log.Warn("spawn /escape", "err", err)
		return 0
	}
	pid, _ := strconv.Atoi(string(bytes.TrimSpace(out)))
	s.log.Info("spawned an escaping descendant (/escape)", "escaped_pid", pid)
	return pid
}

// escapeStage runs one stage of an /escape descendant: 1 starts 2 (stdio
// on /dev/null, empty env, its own session), prints its pid and exits; 2
// ignores SIGTERM and sleeps forever.
// With cgmove (an /cgmove descendant), stage 1 then moves stage 2 out of
// its cgroup (moveCgroup) before it prints the pid; a "sub" stage 2 exits
// on SIGTERM.
func escapeStage(stage int, cgmove string) int {
	if stage >= 2 {
		if cgmove == "sub" {
			signal.Ignore(syscall.SIGHUP)
		} else {
			signal.Ignore(syscall.SIGTERM, syscall.SIGHUP)
		}
		sleepForever()
	}
	args := []string{}
	for _, a := range os.Args[1:] {
		if a != escapeFlag+"=1" {
			args = append(args, a)
		}
	}
	cmd := exec.Command("/proc/self/exe", append(args, escapeFlag+"=2")...)
	cmd.Env = []string{}
	if cgmove == "root" {
		cmd.Env = os.Environ()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "escape stage 1:", err)
		return exitUsage
	}
	if cgmove != "" {
		if err := moveCgroup(cmd.Process.Pid, cgmove); err != nil {
			fmt.Fprintln(os.Stderr, "escape stage 1: /cgmove:", err)
			cmd.Process.Kill()
			return exitUsage
		}
	}
	fmt.Println(cmd.Process.Pid)
	return exitOK
}

// spawnForkbomb starts the /forkbomb shell and returns its pid (0 when it
// could not be started). It is not waited for: it lives until stopped.
func (s *server) spawnForkbomb(n int) int {
	script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do sleep 3600 & i=$((i+1)); done; wait", n)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		s.log.Warn("spawn /forkbomb", "err", err)
		return 0
	}
	s.log.Info("spawned a fork bomb (/forkbomb)", "pid", cmd.Process.Pid, "processes", n)
	pid := cmd.Process.Pid
	go cmd.Wait() // reaped if it ends while we run
	return pid
}

// hogFlag is the hidden flag of a /hog process.
const hogFlag = "--hog-mib"

// maxHogMiB bounds /hog N.
const maxHogMiB = 4096

// spawnHog starts a process (in our session, env kept) that allocates and
// touches n MiB, then sleeps: a test of a memory limit, whose OOM kill
// takes it and not us. It returns the hog's pid (0 when not started).
func (s *server) spawnHog(n int) int {
	cmd := exec.Command("/proc/self/exe", append(append([]string{}, os.Args[1:]...), fmt.Sprintf("%s=%d", hogFlag, n))...)
	if err := cmd.Start(); err != nil {
		s.log.Warn("spawn /hog", "err", err)
		return 0
	}
	pid := cmd.Process.Pid
	go cmd.Wait()
	return pid
}

// hog allocates and touches n MiB, then sleeps until killed.
func hog(n int) int {
	var keep [][]byte
	for i := 0; i < n; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		keep = append(keep, b)
	}
	fmt.Fprintln(os.Stderr, "hog: holding", len(keep), "MiB")
	sleepForever()
	return exitOK
}
