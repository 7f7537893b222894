//go:build race

package main

// raceBuild: the tests (and so the daemon daemontest builds) run under
// the race detector, which multiplies memory use.
const raceBuild = true
