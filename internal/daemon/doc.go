// Package daemon is `sessiond serve`: it wires the store, journal, leases,
// providers, host and rpc server together, handles signals, socket
// activation and systemd notification, and performs the live upgrade
// (the handoff to a new image of the binary, and its adoption).
package daemon
