package host

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/provider"
)

// providerSentinels names every provider error kind (the provider
// package's exported Err… values). TestProviderErrorTable reads the
// package's source: a sentinel added there and not here, or here and not
// in providerKinds, is red.
var providerSentinels = map[string]error{
	"ErrExited":             provider.ErrExited,
	"ErrRequestNotFound":    provider.ErrRequestNotFound,
	"ErrTurnRunning":        provider.ErrTurnRunning,
	"ErrNotStarted":         provider.ErrNotStarted,
	"ErrTimeout":            provider.ErrTimeout,
	"ErrStopping":           provider.ErrStopping,
	"ErrThreadNotFound":     provider.ErrThreadNotFound,
	"ErrDecisionNotAllowed": provider.ErrDecisionNotAllowed,
	"ErrLineTooLong":        provider.ErrLineTooLong,
	"ErrNoHandover":         provider.ErrNoHandover,
	"ErrRequestInFlight":    provider.ErrRequestInFlight,
	"ErrNoThreadCopy":       provider.ErrNoThreadCopy,
	"ErrThreadCopyTooLarge": provider.ErrThreadCopyTooLarge,
}

// TestProviderErrorTable: every provider error kind has its row in
// providerKinds, and providerError gives each, wrapped as adapters wrap
// them, that row's kind.
func TestProviderErrorTable(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("..", "provider", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("provider sources: %v %v", files, err)
	}
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	if len(names) != len(providerSentinels) {
		t.Errorf("provider declares %d sentinels %v, this test names %d: add the new one here and its row to providerKinds",
			len(names), names, len(providerSentinels))
	}
	h := &Host{o: Options{StepTimeout: time.Second}, log: slog.New(slog.DiscardHandler)}
	for _, name := range names {
		sentinel, ok := providerSentinels[name]
		if !ok {
			t.Errorf("provider.%s: not named in providerSentinels (and so maybe not in providerKinds)", name)
			continue
		}
		var row *api.Kind
		for i := range providerKinds {
			if providerKinds[i].err == sentinel {
				row = &providerKinds[i].kind
			}
		}
		if row == nil {
			t.Errorf("provider.%s has no row in providerKinds: which wire error is it?", name)
			continue
		}
		for _, op := range []string{opSend, opInterrupt, opRespond} {
			err := h.providerError(providerCall{session: "s1", op: op, turnID: "t1", requestID: "r1", decision: "approve"},
				fmt.Errorf("adapter: %w", sentinel))
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Kind != *row {
				t.Errorf("provider.%s in %s: %#v, want kind %s", name, op, err, *row)
			}
		}
	}
}

// TestProviderErrorMessages: the messages and data the turn methods
// answered with before the table, kind by kind.
func TestProviderErrorMessages(t *testing.T) {
	h := &Host{o: Options{StepTimeout: 2 * time.Second}, log: slog.New(slog.DiscardHandler)}
	send := providerCall{session: "s1", op: opSend, turnID: "t1"}
	respond := providerCall{session: "s1", op: opRespond, requestID: "r1", decision: "maybe"}
	cancel := providerCall{session: "s1", op: opInterrupt}
	stopping := fmt.Errorf("turn t1: provider: write stdin: %w", provider.ErrStopping)
	refused := errors.New("provider: turn/start: bad request")
	for _, tc := range []struct {
		name string
		err  error
		want *api.Error
	}{
		{"send stopping", h.providerError(send, stopping), &api.Error{Kind: api.KindSessionNotLive,
			Msg: "session s1 is being stopped: turn t1 was not delivered", Err: stopping, Data: map[string]any{"turnId": "t1"}}},
		{"send refused", h.providerError(send, refused), &api.Error{Kind: api.KindProviderFailed,
			Msg: "session s1: provider refused the turn", Err: refused, Data: map[string]any{"turnId": "t1", "cause": refused.Error()}}},
		{"cancel exited", h.providerError(cancel, provider.ErrExited), &api.Error{Kind: api.KindSessionNotLive,
			Msg: "session s1 has no live provider: its child is exiting", Err: provider.ErrExited}},
		{"cancel refused", h.providerError(cancel, refused), &api.Error{Kind: api.KindProviderFailed,
			Msg: "session s1: interrupt", Err: refused, Data: map[string]any{"cause": refused.Error()}}},
		{"respond decision", h.providerError(respond, &provider.DecisionError{Decision: "maybe", Allowed: []string{"approve", "deny"}}),
			&api.Error{Kind: api.KindInvalidParams, Msg: `decision: "maybe" is not an option of request "r1"; allowed: approve, deny`,
				Data: map[string]any{"field": "decision", "allowed": []string{"approve", "deny"}}}},
		{"respond not found", h.providerError(respond, fmt.Errorf("respond r1: %w", provider.ErrRequestNotFound)),
			&api.Error{Kind: api.KindRequestNotFound, Msg: `session s1: no pending approval "r1"`, Data: map[string]any{"requestId": "r1"}}},
		{"respond stopping", h.providerError(respond, stopping), &api.Error{Kind: api.KindSessionNotLive,
			Msg: "session s1 has no live provider: its child is exiting", Err: stopping}},
		{"respond refused", h.providerError(respond, refused), &api.Error{Kind: api.KindProviderFailed,
			Msg: "session s1: respond", Err: refused, Data: map[string]any{"cause": refused.Error()}}},
	} {
		var ae *api.Error
		if !errors.As(tc.err, &ae) || ae.Kind != tc.want.Kind || ae.Msg != tc.want.Msg || ae.Err != tc.want.Err ||
			fmt.Sprint(ae.Data) != fmt.Sprint(tc.want.Data) {
			t.Errorf("%s: %#v\nwant %#v", tc.name, tc.err, tc.want)
		}
	}
	timeout := fmt.Errorf("interrupt turn t1: %w", provider.ErrTimeout)
	var ae *api.Error
	if err := h.providerError(cancel, timeout); !errors.As(err, &ae) || ae.Kind != api.KindProviderFailed ||
		ae.Data["stepTimeoutMs"] != int64(2000) || !errors.Is(err, provider.ErrTimeout) {
		t.Errorf("cancel timeout: %#v", err)
	}
}
