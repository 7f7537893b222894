package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
)

var attachFlags struct {
	after  uint64
	follow bool
}

func init() {
	registerCtl(&ctlCommand{
		name: "attach", usage: "ID [--after N] [--follow]", summary: "print a session's events (read-only: starts nothing)",
		flags: func(fs *flag.FlagSet) {
			fs.Uint64Var(&attachFlags.after, "after", 0, "print events with seq > N")
			fs.BoolVar(&attachFlags.follow, "follow", false, "keep printing new events until Ctrl-C")
		},
		run: ctlAttach,
	})
}

func ctlAttach(e *ctlEnv, args []string) int {
	if len(args) != 1 {
		return e.usageErr("attach", "needs a session id")
	}
	n := newNotices()
	// Every capability, structured holds included: this attach never
	// starts a provider child.
	c, code := e.dial(rpc.ClientOptions{OnNotify: n.on})
	if c == nil {
		return code
	}
	defer c.Close()
	var r api.AttachResult
	p := api.AttachParams{SessionID: args[0], AfterSeq: attachFlags.after, Limit: 4096}
	if err := c.Call(e.ctx, "agentSession.attach", p, &r); err != nil {
		return e.fail(err)
	}
	// With --follow every event, history and live alike, reads as a
	// conversation; without it (or with --json) one event a line.
	rd := newRenderer(e.stdout, args[0], true)
	show := func(ev event.Event) {
		if attachFlags.follow && !e.json {
			rd.event(ev)
		} else {
			printEvent(e.stdout, e.json, ev)
		}
	}
	last := attachFlags.after
	for _, ev := range r.Events {
		show(ev)
		last = ev.Seq
	}
	for more := r.HasMore; more && last < r.LastSeq; {
		var rr api.ReadResult
		if err := c.Call(e.ctx, "agentSession.read", api.ReadParams{SessionID: args[0], AfterSeq: last, Limit: 4096}, &rr); err != nil {
			return e.fail(err)
		}
		for _, ev := range rr.Events {
			if ev.Seq > r.LastSeq {
				break // those come as notifications
			}
			show(ev)
			last = ev.Seq
		}
		more = rr.HasMore && len(rr.Events) > 0
	}
	if !attachFlags.follow {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Call(ctx, "agentSession.detach", api.DetachParams{SubscriptionID: r.SubscriptionID}, nil)
		return exitcode.OK
	}
	for {
		ev, err := n.next(e.ctx, c.Done())
		switch {
		case err != nil && e.stalled() != nil:
			return e.fail(err)
		case errors.Is(err, context.Canceled):
			return exitcode.OK
		case err != nil:
			fmt.Fprintln(e.stderr, "sessiond ctl attach:", err)
			return exitcode.Error
		}
		show(ev)
	}
}
