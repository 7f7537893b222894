// Package chaos holds the crash-safety test: the real daemon under a
// randomized multi-client workload, killed with SIGKILL at random moments
// and restarted on the same state, with the invariants of PROTOCOL.md's
// Startup section checked after every restart. `make test` runs a short
// version; `make chaos` passes -rounds=200. The package has no production
// code.
package chaos
