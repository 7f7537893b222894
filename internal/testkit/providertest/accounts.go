package providertest

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// AccountTable is the [providers.PROFILE.accounts.NAME] table of an
// account whose env overlays the profile's.
func AccountTable(profile, name string, env map[string]string) string {
	var kv []string
	for k, v := range env {
		kv = append(kv, fmt.Sprintf("%s = %q", k, v))
	}
	sort.Strings(kv)
	return fmt.Sprintf("[providers.%s.accounts.%s]\nenv = { %s }\n", profile, name, strings.Join(kv, ", "))
}

// Switch asks for the session's switch to account (when "" is the
// default, "idle") and returns the answer.
func (s *Session) Switch(t testing.TB, account, when string) api.SwitchAccountResult {
	t.Helper()
	var r api.SwitchAccountResult
	if err := s.C.Call(Ctx(t), "agentSession.switchAccount", api.SwitchAccountParams{SessionID: s.ID, Account: account, When: when}, &r); err != nil {
		t.Fatalf("switch to %s: %v", account, err)
	}
	return r
}

// Accounts is listAccounts of provider, by name.
func (s *Session) Accounts(t testing.TB, provider string) map[string]api.AccountInfo {
	t.Helper()
	var r api.ListAccountsResult
	if err := s.C.Call(Ctx(t), "agentSession.listAccounts", api.ListAccountsParams{Provider: provider}, &r); err != nil {
		t.Fatal(err)
	}
	out := map[string]api.AccountInfo{}
	for _, a := range r.Accounts {
		out[a.Name] = a
	}
	return out
}

// Switched waits for the next account.switched and checks its from, to,
// cause and continuity.
func (s *Session) Switched(t testing.TB, from, to, cause, continuity string) event.AccountSwitchData {
	t.Helper()
	got := Decode[event.AccountSwitchData](t, s.Next(t, event.AccountSwitched))
	if got.From != from || got.To != to || got.Cause != cause || got.Continuity != continuity {
		t.Fatalf("account.switched %+v, want %s -> %s cause %s continuity %s", got, from, to, cause, continuity)
	}
	return got
}

// Turn sends text and waits for its turn.completed, which must be
// completed; it returns the turn's id.
func (s *Session) Turn(t testing.TB, text string) string {
	t.Helper()
	id := s.Send(t, text)
	for {
		ev := s.Next(t, event.TurnCompleted)
		if ev.TurnID != id {
			continue
		}
		if tc := Decode[event.TurnCompletedData](t, ev); tc.Status != event.StatusCompleted {
			t.Fatalf("turn %q ended %+v", text, tc)
		}
		return id
	}
}

// Order fails unless the journal evs holds, in this order, an event
// matching each of want (a type, or "type@turnId").
func Order(t testing.TB, evs []event.Event, want ...string) {
	t.Helper()
	i := 0
	for _, ev := range evs {
		if i < len(want) && (want[i] == ev.Type || want[i] == ev.Type+"@"+ev.TurnID) {
			i++
		}
	}
	if i < len(want) {
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type)
		}
		t.Fatalf("journal lacks %s after %v, in order; it has %s", want[i], want[:i], strings.Join(types, ","))
	}
}
