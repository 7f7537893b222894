// Package chaos holds the crash-safety test: the real daemon under a
// randomized multi-client workload, killed with SIGKILL at random moments
// and restarted on the same state, with the invariants of PROTOCOL.md's
// Startup section checked after every restart. `make test` runs a short
// version; `make chaos` passes -rounds=200. TestChaosShared runs the same
// with the echo profile on processes = "account" (every session a thread
// of one runtime) and, each round, a SIGKILL of a runtime mid-turn while
// the daemon lives (its sessions must leave the dead pid within 8 s)
// before the daemon's own SIGKILL; after each restart, before any hold,
// no runtime record may be left (daemon.stats staleRuntimeRecords: the
// startup reaped each crashed run's runtime and deleted its record).
// TestChaosUpgradeShared is the live upgrade run (TestChaosUpgrade) on
// shared runtimes, a runtime SIGKILLed around the handover in about half
// the rounds. The package has no production code.
package chaos
