package ctl

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// In-process tests run as the test binary: their hints name
	// `sessiond`, as an installed one's do (TestSelfName, and the e2e
	// tests, cover the naming itself).
	self = func() string { return "sessiond" }
	goleak.VerifyTestMain(m)
}
