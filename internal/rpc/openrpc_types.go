package rpc

import (
	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// wireTypes names the Go types a method decodes its params into and
// encodes its result from; rpc.discover's schemas are generated from them.
// A test keeps its keys equal to the method table's names.
type wireTypes struct {
	params any // nil: no params
	result any // nil: any JSON value
}

// empty is the result {} (and the params of methods that take none).
type empty = struct{}

var methodTypes = map[string]wireTypes{
	"agentSession.attach":        {api.AttachParams{}, api.AttachResult{}},
	"agentSession.cancel":        {api.SessionParams{}, api.CancelResult{}},
	"agentSession.close":         {api.SessionParams{}, api.CloseResult{}},
	"agentSession.create":        {api.CreateParams{}, api.SessionInfo{}},
	"agentSession.delete":        {api.SessionParams{}, empty{}},
	"agentSession.detach":        {api.DetachParams{}, empty{}},
	"agentSession.get":           {api.SessionParams{}, api.SessionInfo{}},
	"agentSession.hold":          {api.HoldParams{}, api.HoldResult{}},
	"agentSession.list":          {api.ListParams{}, api.ListResult{}},
	"agentSession.listAccounts":  {api.ListAccountsParams{}, api.ListAccountsResult{}},
	"agentSession.read":          {api.ReadParams{}, api.ReadResult{}},
	"agentSession.release":       {api.ReleaseParams{}, api.ReleaseResult{}},
	"agentSession.respond":       {api.RespondParams{}, empty{}},
	"agentSession.send":          {api.SendParams{}, api.SendResult{}},
	"agentSession.switchAccount": {api.SwitchAccountParams{}, api.SwitchAccountResult{}},
	"daemon.shutdown":            {nil, empty{}},
	"daemon.stats":               {nil, map[string]any{}},
	"daemon.status":              {nil, Status{}},
	"daemon.upgrade":             {api.UpgradeParams{}, api.UpgradeResult{}},
	"initialize":                 {InitializeParams{}, InitializeResult{}},
	"rpc.discover":               {nil, map[string]any{}},
}

// notifyTypes are the params of the notifications the server sends.
var notifyTypes = map[string]any{
	NotifyEvent:      api.EventNotice{},
	NotifyLagged:     api.LaggedNotice{},
	NotifyRestarting: api.RestartingNotice{},
	NotifyAttention:  api.AttentionNotice{},
}

// eventData maps every journal event type to the Go type of its data
// (nil: a free-form object the host builds as a map). A test keeps its keys
// equal to internal/event's event type constants.
var eventData = map[string]any{
	event.SessionCreated:        nil,
	event.LeaseAcquired:         nil,
	event.ProviderStarted:       nil,
	event.ProviderThreadReplace: event.ThreadReplacedData{},
	event.TurnStarted:           event.TurnStartedData{},
	event.MessageDelta:          event.DeltaData{},
	event.MessageCompleted:      event.DeltaData{},
	event.ApprovalRequested:     event.ApprovalRequestedData{},
	event.ApprovalResolved:      event.ApprovalResolvedData{},
	event.TurnCompleted:         event.TurnCompletedData{},
	event.ProviderExited:        event.ProviderExitedData{},
	event.ProviderDetached:      event.ProviderDetachedData{},
	event.SessionEnded:          event.SessionEndedData{},
	event.LeaseReleased:         nil,
	event.JournalLoss:           event.JournalLossData{},
	event.JournalCorrupt:        event.JournalCorruptData{},
	event.ItemStarted:           event.ItemData{},
	event.ItemDelta:             event.ItemDeltaData{},
	event.ItemCompleted:         event.ItemData{},
	event.TurnPlan:              event.TurnPlanData{},
	event.TurnDiff:              event.TurnDiffData{},
	event.TurnUsage:             event.TurnUsageData{},
	event.ProviderNotice:        event.NoticeData{},
	event.AccountSwitchQueued:   event.AccountSwitchData{},
	event.AccountSwitched:       event.AccountSwitchData{},
	event.AccountSwitchFailed:   event.AccountSwitchData{},
	event.AccountExhausted:      event.AccountExhaustedData{},
}

// protoErrors are the protocol-level errors (not an api.Kind), by
// data.reason. A test keeps it in step with the protoError constructors
// and the batch answer.
var protoErrors = map[string]int64{
	"method_not_found":          CodeMethodNotFound,
	"capability_not_negotiated": CodeMethodNotFound,
	"invalid_request":           CodeInvalidRequest,
	"already_initialized":       CodeInvalidRequest,
	"batch_not_supported":       CodeInvalidRequest,
}
