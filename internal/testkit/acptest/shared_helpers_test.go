package acptest_test

import (
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// The tests below run the pinned codex-acp with processes = "account":
// every session of the profile is an ACP session of one codex-acp process
// (one runtime). Their sessions run turns at once, so the model answers
// by what each request asks (sharedModel), not in script order. (The
// model and checks are codextest's, shared with its shared tests.)

// sharedACP is codexACP with processes = "account".
func sharedACP(t *testing.T, name string, m *codextest.Model) string {
	return codexACP(t, name, m) + "processes = \"account\"\n"
}
