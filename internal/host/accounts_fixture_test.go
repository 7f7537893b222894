package host

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/provider/echo"
)

// acctProv gives p the accounts the tests switch between: a and b (echo
// homes that exist), gone (a home that does not), file and loop (a
// regular file, a symlink to itself), limited and
// itemlimited (every turn ends rate-limited: at once, or after a
// command ran), with echo's Mover; failover, when set, is the profile's.
// A failed turn whose error is echo's usage-limit text ends
// {rate_limited, resetsAt} (what the codex adapter's classification,
// built elsewhere, does with codex's answer).
func acctProv(p Provider, dir string, failover []string) Provider {
	home := func(n string) string {
		d := filepath.Join(dir, "homes", p.Name, n)
		if n != "gone" {
			if err := os.MkdirAll(d, 0o700); err != nil {
				panic(err)
			}
		}
		return d
	}
	p.Accounts = map[string]map[string]string{
		"a":           {echo.HomeEnv: home("a")},
		"b":           {echo.HomeEnv: home("b")},
		"gone":        {echo.HomeEnv: home("gone")},
		"file":        {echo.HomeEnv: homeFile(dir, p.Name)},
		"loop":        {echo.HomeEnv: homeLoop(dir, p.Name)},
		"limited":     {echo.HomeEnv: home("limited"), echo.RateLimitEnv: "1"},
		"itemlimited": {echo.HomeEnv: home("itemlimited"), echo.RateLimitEnv: "item"},
	}
	p.Failover, p.Mover = failover, echo.Move
	next := p.New
	p.New = func(o provider.Options) provider.Adapter { o.Emit = classifyLimit(o.Emit); return next(o) }
	if p.NewRuntime != nil {
		p = classifyRuntime(p)
	}
	return p
}

// homeFile is a home that is a regular file: nothing can be written in it.
func homeFile(dir, profile string) string {
	f := filepath.Join(dir, "homes", profile, "file")
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		panic(err)
	}
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		panic(err)
	}
	return f
}

// homeLoop is a home that is a symlink to itself.
func homeLoop(dir, profile string) string {
	l := filepath.Join(dir, "homes", profile, "loop")
	if err := os.MkdirAll(filepath.Dir(l), 0o700); err != nil {
		panic(err)
	}
	if err := os.Symlink(l, l); err != nil {
		panic(err)
	}
	return l
}

// classifyRuntime makes p's runtime threads classify rate limits too.
func classifyRuntime(p Provider) Provider {
	next := p.NewRuntime
	p.NewRuntime = func(o provider.RuntimeOptions) provider.Runtime { return limitRuntime{next(o)} }
	return p
}

type limitRuntime struct{ provider.Runtime }

func (r limitRuntime) Thread(o provider.Options) provider.Thread {
	o.Emit = classifyLimit(o.Emit)
	return r.Runtime.Thread(o)
}

// classifyLimit turns a failed turn.completed carrying echo's usage-limit
// text into {failed, rate_limited, resetsAt}.
func classifyLimit(emit func(event.Draft)) func(event.Draft) {
	return func(d event.Draft) {
		if d.Type == event.TurnCompleted {
			var td event.TurnCompletedData
			if json.Unmarshal(d.Data, &td) == nil && td.Status == event.StatusFailed && strings.Contains(td.Error, echo.UsageLimitMessage) {
				td.Reason = event.ReasonRateLimited
				if i := strings.Index(td.Error, "resets_at="); i >= 0 {
					if t, err := time.Parse(time.RFC3339, strings.Fields(td.Error[i+len("resets_at="):])[0]); err == nil {
						td.ResetsAt = t.Format(time.RFC3339)
					}
				}
				d = event.New(d.Type, d.TurnID, td)
			}
		}
		emit(d)
	}
}
