// Package e2e holds the end-to-end tests: they build the sessiond binary
// (internal/testkit/daemontest), run it as a daemon and drive it over its
// socket and through `sessiond ctl`, as a user would.
package e2e
