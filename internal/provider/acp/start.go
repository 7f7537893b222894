package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
)

// maxSessionIDBytes bounds an agent's sessionId (the session's thread id).
const maxSessionIDBytes = 256

type initializeResult struct {
	ProtocolVersion *json.Number `json:"protocolVersion"`
	AgentInfo       struct {
		Name string `json:"name"`
	} `json:"agentInfo"`
	AgentCapabilities struct {
		LoadSession         bool `json:"loadSession"`
		SessionCapabilities struct {
			Close json.RawMessage `json:"close"` // present (an object): session/close is served
		} `json:"sessionCapabilities"`
	} `json:"agentCapabilities"`
	AuthMethods []authMethod `json:"authMethods"`
}

type authMethod struct {
	ID string `json:"id"`
}

// maxAuthMethodsShown bounds the authMethods an error names (the agent
// chooses how many, and how long each id is).
const maxAuthMethodsShown = 16

// authMethodList is the agent's authMethods as an error names them: the
// first maxAuthMethodsShown ids as names (agentName), then how many more.
func authMethodList(ams []authMethod) string {
	ids := make([]string, 0, min(len(ams), maxAuthMethodsShown))
	for _, am := range ams[:min(len(ams), maxAuthMethodsShown)] {
		ids = append(ids, agentName(am.ID))
	}
	s := fmt.Sprintf("%v", ids)
	if n := len(ams) - len(ids); n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}

// Start initializes the agent (protocol version 1, no fs or terminal
// capabilities), authenticates when the profile names a method, and opens
// the session: session/load of Options.ThreadID (its replayed history is
// not journaled), or session/new. A resume of an agent without
// loadSession, or one the agent answers not-found, is a fresh session,
// reported in StartResult.Replaced and journaled as
// provider.thread_replaced; any other load failure fails Start and keeps
// the old id. An agent that answers another protocolVersion fails Start
// naming it. Start is bounded by ctx (the host's start_timeout).
func (a *Adapter) Start(ctx context.Context) (provider.StartResult, error) {
	var res provider.StartResult
	if a.rt == nil { // a shared runtime did its handshake once (Runtime.Handshake)
		facts, err := a.handshake(ctx)
		if err != nil {
			return res, err
		}
		a.mu.Lock()
		a.canLoad = facts.canLoad
		a.mu.Unlock()
	}
	a.mu.Lock()
	canLoad := a.canLoad
	a.mu.Unlock()
	old := a.o.ThreadID
	switch {
	case old != "" && !canLoad:
		id, err := a.newSession(ctx)
		if err != nil {
			return res, fmt.Errorf("session %s cannot be loaded (the agent has no loadSession), starting a new one: %w", old, err)
		}
		res.ThreadID = id
		res.Replaced = &event.ThreadReplacedData{OldThreadID: old, NewThreadID: id, Cause: "the agent cannot load sessions (no loadSession capability)"}
	case old != "":
		err := a.loadSession(ctx, old)
		switch {
		case err == nil:
			res.ThreadID, res.Resumed = old, true
		case isNotFound(err):
			id, nerr := a.newSession(ctx)
			if nerr != nil {
				return res, fmt.Errorf("session %s gone, starting a new one: %w", old, nerr)
			}
			res.ThreadID = id
			res.Replaced = &event.ThreadReplacedData{OldThreadID: old, NewThreadID: id, Cause: "session/load: " + capText(agentError(err), 500)}
		default:
			return res, fmt.Errorf("acp session/load %s: %w", old, err)
		}
	default:
		id, err := a.newSession(ctx)
		if err != nil {
			return res, fmt.Errorf("acp session/new: %w", err)
		}
		res.ThreadID = id
		if r := a.o.Replaces; r != nil {
			d := *r
			d.NewThreadID = id
			res.Replaced = &d
		}
	}
	a.mu.Lock()
	a.threadID = res.ThreadID
	a.started = true
	a.mu.Unlock()
	if res.Replaced != nil {
		a.emit(event.New(event.ProviderThreadReplace, "", *res.Replaced))
	}
	return res, nil
}

// handshake is initialize (protocol version 1, no fs or terminal
// capabilities) and, when the profile names a method, authenticate; it
// reports what the agent said of itself.
func (a *Adapter) handshake(ctx context.Context) (agentFacts, error) {
	raw, err := a.request(ctx, "initialize", map[string]any{
		"protocolVersion":    ProtocolVersion,
		"clientCapabilities": map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]any{"name": "sessiond", "title": "sessiond", "version": ClientVersion},
	}, nil)
	if err != nil {
		return agentFacts{}, fmt.Errorf("acp initialize: %w", err)
	}
	var ir initializeResult
	if ok, _ := provider.Decode(raw, &ir); !ok {
		return agentFacts{}, fmt.Errorf("acp initialize: the agent's answer is no InitializeResponse: %s", capText(string(raw), 200))
	}
	if ir.ProtocolVersion == nil || ir.ProtocolVersion.String() != "1" {
		got := "none"
		if ir.ProtocolVersion != nil {
			got = ir.ProtocolVersion.String()
		}
		return agentFacts{}, fmt.Errorf("acp initialize: the agent speaks protocolVersion %s; sessiond speaks %d", got, ProtocolVersion)
	}
	if m := a.p.AuthMethod; m != "" {
		if !slices.ContainsFunc(ir.AuthMethods, func(am authMethod) bool { return am.ID == m }) {
			return agentFacts{}, fmt.Errorf("acp authenticate: auth_method %q is not among the agent's authMethods %s", m, authMethodList(ir.AuthMethods))
		}
		if _, err := a.request(ctx, "authenticate", map[string]any{"methodId": m}, nil); err != nil {
			return agentFacts{}, fmt.Errorf("acp authenticate %s: %w", m, err)
		}
	}
	c := ir.AgentCapabilities
	return agentFacts{canLoad: c.LoadSession, canClose: len(c.SessionCapabilities.Close) > 0 && c.SessionCapabilities.Close[0] == '{',
		name: ir.AgentInfo.Name}, nil
}

// agentFacts is what an agent's initialize answer says of it.
type agentFacts struct {
	canLoad  bool   // agentCapabilities.loadSession
	canClose bool   // sessionCapabilities.close: session/close is served
	name     string // agentInfo.name
}

// newSession runs session/new and returns the agent's sessionId.
// The session is ours as its answer is read (on the reader goroutine):
// the updates the agent sends right after it are matched to it.
func (a *Adapter) newSession(ctx context.Context) (string, error) {
	var r struct {
		SessionID string `json:"sessionId"`
	}
	var bindErr error
	if a.rt != nil {
		a.rt.beginOpen()
		defer a.rt.endOpen()
	}
	raw, err := a.request(ctx, "session/new", map[string]any{"cwd": a.o.Cwd, "mcpServers": []any{}},
		func(raw json.RawMessage, rerr *RPCError) {
			if rerr != nil {
				return
			}
			provider.Decode(raw, &r)
			if !validSessionID(r.SessionID) {
				return
			}
			if a.rt != nil { // the runtime routes the session's lines here from the next line on
				if bindErr = a.rt.bind(r.SessionID, a); bindErr != nil {
					return
				}
			}
			a.mu.Lock()
			a.threadID = r.SessionID
			a.mu.Unlock()
			if a.rt != nil {
				for _, l := range a.rt.claimEarly(r.SessionID) { // written before the answer: the session's, in order
					a.handleLine(l)
				}
			}
		})
	if err != nil {
		return "", err
	}
	if !validSessionID(r.SessionID) {
		return "", fmt.Errorf("the agent's session/new answer has no usable sessionId: %s", capText(string(raw), 200))
	}
	if bindErr != nil {
		return "", bindErr
	}
	return r.SessionID, nil
}

// loadSession runs session/load; until its answer is read, the updates of
// that session are the agent replaying history: not journaled.
func (a *Adapter) loadSession(ctx context.Context, id string) error {
	if a.rt != nil { // the replay is routed here, to be dropped
		if err := a.rt.bind(id, a); err != nil {
			return err
		}
	}
	a.mu.Lock()
	a.loading = id
	a.mu.Unlock()
	_, err := a.request(ctx, "session/load", map[string]any{"sessionId": id, "cwd": a.o.Cwd, "mcpServers": []any{}},
		func(_ json.RawMessage, rerr *RPCError) {
			a.mu.Lock()
			a.loading = ""
			if rerr == nil {
				a.threadID = id
			}
			a.mu.Unlock()
		})
	a.mu.Lock()
	a.loading = ""
	a.mu.Unlock()
	if err != nil && a.rt != nil {
		a.rt.release(id, a)
	}
	return err
}

// isNotFound: a load the agent refused because it does not have the
// session (ACP's resource-not-found, or an agent's own wording of it).
func isNotFound(err error) bool {
	var re *RPCError
	if !errors.As(err, &re) {
		return false
	}
	if re.Code == codeResourceNotFound {
		return true
	}
	msg := strings.ToLower(re.Message + " " + string(re.Data))
	return strings.Contains(msg, "not found") || strings.Contains(msg, "no previous session") || strings.Contains(msg, "does not exist")
}

// validSessionID: a non-empty sessionId of at most maxSessionIDBytes
// without control characters.
func validSessionID(id string) bool {
	if id == "" || len(id) > maxSessionIDBytes {
		return false
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// agentError is the agent's own error text in err (or err's).
func agentError(err error) string {
	var re *RPCError
	if errors.As(err, &re) {
		return re.Error()
	}
	return err.Error()
}
