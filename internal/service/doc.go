// Package service is `sessiond install-service`: it writes the platform's
// service files naming this binary (the systemd user units on Linux, the
// launchd agent on macOS).
package service
