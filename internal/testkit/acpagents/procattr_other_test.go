//go:build !linux

package acpagents_test

import "syscall"

// groupAttr starts an agent in a process group of its own (no parent-death
// signal outside Linux: the test's cleanup kills the group).
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
