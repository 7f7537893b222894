package daemon

import (
	"context"
	"runtime"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/attention"
	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/host"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/rpc"
)

// attentionParts are what the attention loop reads, set as run builds
// them: the journal (its open turns), the host (titles, subscribers) and
// the server (the connections). Start runs only once all three are set.
type attentionParts struct {
	j   *journal.Journal
	h   *host.Host
	srv *rpc.Server
}

// newAttention builds keep-awake and notifications from the config
// (keep_awake, notify) over parts; the caller starts it once parts is
// complete.
func (d *daemon) newAttention(parts *attentionParts) *attention.Attention {
	o := attention.Options{Logger: d.log,
		Running: func() int { return openTurns(parts.j) },
		Attached: func(id string) bool {
			si, err := parts.h.Get(context.Background(), id)
			return err == nil && si.Subscribers > 0
		},
		Title: func(id string) string {
			si, _ := parts.h.Get(context.Background(), id)
			return si.Title
		},
		Publish: func(n api.AttentionNotice) { parts.srv.NotifyAttention(n) },
	}
	if d.cfg.KeepAwake {
		o.Inhibitor = inhibitor()
	}
	if d.cfg.Notify == config.NotifyDesktop {
		o.Desktop = desktop()
	}
	return attention.New(o)
}

// openTurns counts the sessions whose journal shows a running turn.
func openTurns(j *journal.Journal) int {
	n := 0
	for _, id := range j.Sessions() {
		if j.State(id).OpenTurn != "" {
			n++
		}
	}
	return n
}

// inhibitor and desktop pick the platform's mechanism.
func inhibitor() attention.Inhibitor {
	if runtime.GOOS == "darwin" {
		return attention.Caffeinate{}
	}
	return attention.Logind{}
}

func desktop() attention.Desktop {
	if runtime.GOOS == "darwin" {
		return attention.Osascript{}
	}
	return attention.FreedesktopNotify{}
}
