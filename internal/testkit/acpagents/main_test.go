package acpagents_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests (each agent's
// reader and waiter end with its process group).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
