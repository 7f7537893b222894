package rpc

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/sessiond/sessiond/internal/api"
)

// Capabilities is every capability the server offers, sorted.
var Capabilities = []string{api.CapApprovalsV2, api.CapAttach, api.CapClose, api.CapItems, api.CapStructuredHold, api.CapTurns, api.CapAdmin, api.CapAttention, api.CapUpgrade, api.CapRuntimes, api.CapAccounts}

// methodUpgrade is daemon.upgrade: not held by the call gate it closes.
const methodUpgrade = "daemon.upgrade"

// Notification methods and the capability each needs.
const (
	NotifyEvent  = "agentSession.event"
	NotifyLagged = "agentSession.lagged"
	// NotifyAttention tells a connection that some session needs the
	// user (attention.go).
	NotifyAttention = "daemon.attention"
)

var notifyCaps = map[string]string{NotifyEvent: api.CapAttach, NotifyLagged: api.CapAttach, NotifyAttention: api.CapAttention}

// handlerFunc answers one request. The result may be an *afterReply to run
// something once the reply is on the wire.
type handlerFunc func(ctx context.Context, c *conn, params json.RawMessage) (any, error)

// afterReply is a result whose then runs after the reply was written
// (attach starts its pump; shutdown calls OnShutdown).
type afterReply struct {
	result any
	then   func()
}

// method is one row of the method table.
type method struct {
	name       string
	capability string // "" = open to every initialized client
	slow       bool   // can wait on a session: runs in its session's queue (queue.go)
	// handle answers a fast method, queued prepares a slow one (queued.go).
	handle handlerFunc
	queued queuedFunc
}

// methodList is THE method table, sorted by name (a test keeps it sorted
// and in step with docs/protocol.md).
var methodList = []method{
	{name: "agentSession.attach", capability: api.CapAttach, slow: true, queued: queued(hAttach)},
	{name: "agentSession.cancel", capability: api.CapTurns, slow: true, queued: queued(hCancel)},
	{name: "agentSession.close", capability: api.CapClose, slow: true, queued: queued(hClose)},
	{name: "agentSession.create", slow: true, queued: queued(hCreate)},
	{name: "agentSession.delete", slow: true, queued: queued(hDelete)},
	{name: "agentSession.detach", capability: api.CapAttach, handle: hDetach},
	{name: "agentSession.get", handle: hGet},
	{name: "agentSession.hold", capability: api.CapStructuredHold, slow: true, queued: queuedNow(hHold, nowHold)},
	{name: "agentSession.list", handle: hList},
	{name: "agentSession.listAccounts", capability: api.CapAccounts, handle: hListAccounts},
	{name: "agentSession.read", capability: api.CapAttach, handle: hRead},
	{name: "agentSession.release", capability: api.CapStructuredHold, slow: true, queued: queuedNow(hRelease, nowRelease)},
	{name: "agentSession.respond", capability: api.CapTurns, slow: true, queued: queued(hRespond)},
	{name: "agentSession.send", capability: api.CapTurns, slow: true, queued: queued(hSend)},
	{name: "agentSession.switchAccount", capability: api.CapAccounts, slow: true, queued: queued(hSwitchAccount)},
	{name: "daemon.shutdown", capability: api.CapAdmin, handle: hShutdown},
	{name: "daemon.stats", capability: api.CapAdmin, handle: hStats},
	{name: "daemon.status", handle: hStatus},
	{name: methodUpgrade, capability: api.CapUpgrade, handle: hUpgrade},
	{name: "initialize", handle: hInitialize},
	{name: "rpc.discover", handle: hDiscover},
}

// newTable indexes ms by name; a duplicate is a programming error.
func newTable(ms []method) map[string]method {
	t := make(map[string]method, len(ms))
	for _, m := range ms {
		if _, dup := t[m.name]; dup {
			panic("rpc: method registered twice: " + m.name)
		}
		t[m.name] = m
	}
	return t
}

// MethodNames lists the table's methods, sorted.
func MethodNames() []string {
	names := make([]string, len(methodList))
	for i, m := range methodList {
		names[i] = m.name
	}
	sort.Strings(names)
	return names
}
