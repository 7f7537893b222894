//go:build race

package e2e

// raceBuild: the tests (and so the daemon daemontest builds) run under
// the race detector, which multiplies memory use.
const raceBuild = true
