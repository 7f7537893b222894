package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/tty"
)

func init() {
	registerCtl(&ctlCommand{
		name: "send", usage: "ID TEXT", summary: "hold, send one message, stream the reply, release",
		run: ctlSend,
	})
}

func ctlSend(e *ctlEnv, args []string) int {
	if len(args) != 2 {
		return e.usageErr("send", "needs a session id and the text")
	}
	id, text := args[0], args[1]
	n := newNotices()
	c, code := e.dial(rpc.ClientOptions{OnNotify: n.on})
	if c == nil {
		return code
	}
	defer c.Close()
	holder := defaultHolder()
	var h api.HoldResult
	if err := c.Call(e.ctx, "agentSession.hold", api.HoldParams{SessionID: id, HolderID: holder, Surface: "ctl"}, &h); err != nil {
		return e.fail(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Call(ctx, "agentSession.release", api.ReleaseParams{SessionID: id, HolderID: holder, HoldToken: h.HoldToken}, nil)
	}()
	var s api.SessionInfo
	if err := c.Call(e.ctx, "agentSession.get", api.SessionParams{SessionID: id}, &s); err != nil {
		return e.fail(err)
	}
	var a api.AttachResult
	if err := c.Call(e.ctx, "agentSession.attach", api.AttachParams{SessionID: id, AfterSeq: s.LastSeq, Limit: 4096}, &a); err != nil {
		return e.fail(err)
	}
	var sr api.SendResult
	if err := c.Call(e.ctx, "agentSession.send", api.SendParams{SessionID: id, Text: text}, &sr); err != nil {
		return e.fail(err)
	}
	backlog := a.Events
	r := newRenderer(e.stdout, id, false)
	for {
		var ev event.Event
		var err error
		if len(backlog) > 0 {
			ev, backlog = backlog[0], backlog[1:]
		} else {
			ev, err = n.next(e.ctx, c.Done())
		}
		if err != nil && e.stalled() != nil {
			return e.fail(err)
		}
		if errors.Is(err, context.Canceled) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c.Call(ctx, "agentSession.cancel", api.SessionParams{SessionID: id}, nil)
			cancel()
			fmt.Fprintln(e.stderr, "\nsessiond ctl send: interrupted; turn cancelled")
			return exitcode.Error
		}
		if err != nil {
			fmt.Fprintln(e.stderr, "sessiond ctl send:", err)
			return exitcode.Error
		}
		if ev.TurnID != sr.TurnID {
			continue
		}
		if e.json {
			printEvent(e.stdout, true, ev)
		} else if ev.Type != event.TurnCompleted {
			r.event(ev)
		}
		switch ev.Type {
		case event.TurnCompleted:
			var d struct {
				Status string `json:"status"`
				Reason string `json:"reason"`
			}
			json.Unmarshal(ev.Data, &d)
			if !e.json && r.midLine {
				fmt.Fprintln(e.stdout)
			}
			if !e.json && r.usage != "" {
				fmt.Fprintln(e.stdout, r.usage) // the turn's token use, last
			}
			if d.Status != event.StatusCompleted {
				fmt.Fprintf(e.stderr, "sessiond ctl send: turn %s %s %s\n", tty.Safe(sr.TurnID), tty.Safe(d.Status), tty.Safe(d.Reason))
				return exitcode.Error
			}
			return exitcode.OK
		}
	}
}
