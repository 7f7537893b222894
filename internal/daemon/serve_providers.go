package daemon

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/host"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/provider/acp"
	"github.com/sessiond/sessiond/internal/provider/claude"
	"github.com/sessiond/sessiond/internal/provider/codex"
	"github.com/sessiond/sessiond/internal/provider/echo"
)

// protocols: each configured protocol's adapter, and the command-line
// arguments with which it resumes a thread (none: it resumes over stdio).
var protocols = map[string]struct {
	new        provider.New
	newRuntime provider.NewRuntime // a protocol whose process can serve many sessions
	resumeArgs func(string) []string
	// freshThread mints a fresh thread's id for the command line (nil:
	// the provider names its threads).
	freshThread func(reuse string) (string, []string, error)
	adopt       provider.Adopt // rebuilds the adapter around a child a live upgrade handed over
	// adoptRuntime rebuilds a shared runtime a live upgrade handed over.
	adoptRuntime provider.AdoptRuntime
	// mover carries a thread's copy between two accounts (nil: a switch
	// is portable).
	mover provider.Mover
}{
	config.ProtocolCodexAppServer: {new: codex.New, newRuntime: codex.NewRuntime, adopt: codex.Adopt, adoptRuntime: codex.AdoptRuntime,
		mover: codex.Move},
	config.ProtocolClaudeStreamJSON: {new: claude.New, resumeArgs: claude.ResumeArgs, freshThread: claude.FreshThread, adopt: claude.Adopt,
		mover: claude.Move},
	config.ProtocolACP: {new: acp.New, newRuntime: acp.NewRuntime, adopt: acp.Adopt, adoptRuntime: acp.AdoptRuntime},
}

// providers builds host providers from the config: echo defaults to this
// executable + "provider echo", with its threads under the state dir.
func (d *daemon) providers() (map[string]host.Provider, error) {
	out := make(map[string]host.Provider, len(d.cfg.Providers))
	for name, p := range d.cfg.Providers {
		proto, ok := protocols[p.Protocol]
		if !ok {
			return nil, fmt.Errorf("providers.%s: protocol %q is not implemented", name, p.Protocol)
		}
		hp := host.Provider{Name: name, Command: p.Command, Env: map[string]string{}, New: proto.new, ResumeArgs: proto.resumeArgs,
			FreshThread: proto.freshThread, Adopt: proto.adopt, Shared: p.Shared(), NewRuntime: proto.newRuntime,
			AdoptRuntime: proto.adoptRuntime, Mover: proto.mover}
		if p.Protocol == config.ProtocolACP {
			hp.New = acp.NewFor(acp.Profile{AuthMethod: p.AuthMethod})
			hp.NewRuntime = acp.NewRuntimeFor(acp.Profile{AuthMethod: p.AuthMethod})
		}
		for k, v := range p.Env {
			hp.Env[k] = v
		}
		if len(p.Accounts) > 0 {
			hp.Accounts = make(map[string]map[string]string, len(p.Accounts))
			for an, a := range p.Accounts {
				hp.Accounts[an] = maps.Clone(a.Env)
			}
		}
		hp.Failover = slices.Clone(p.Failover)
		if name == "echo" {
			if len(hp.Command) == 0 {
				exe, err := os.Executable()
				if err != nil {
					return nil, fmt.Errorf("providers.echo: %w", err)
				}
				hp.Command = []string{exe, "provider", "echo"}
			}
			hp.Mover = echo.Move // an account is a home: a thread moves as its file
			if _, ok := hp.Env["SESSIOND_ECHO_HOME"]; !ok {
				hp.Env["SESSIOND_ECHO_HOME"] = filepath.Join(d.stateDir, "providers", "echo")
			}
		}
		out[name] = hp
	}
	return out, nil
}
