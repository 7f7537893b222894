package acpagents

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/chatmodel"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/geminimodel"
)

// Step is one scripted model reply, whatever API the agent calls: text
// deltas, a call of the agent's shell tool, or text that stalls mid-stream
// until Stall is closed.
type Step struct {
	Deltas []string
	Shell  string // a command for the agent's shell tool
	Stall  chan struct{}
}

// Say is a step streaming text in the given deltas.
func Say(deltas ...string) Step { return Step{Deltas: deltas} }

// Shell is a step calling the agent's shell tool with cmd.
func Shell(cmd string) Step { return Step{Shell: cmd} }

// Stall is a step streaming "slow", then holding the stream open until
// release is closed.
func Stall(release chan struct{}) Step { return Step{Deltas: []string{"slow"}, Stall: release} }

// Model is the scripted model server of the agent's API on 127.0.0.1.
type Model struct {
	URL string // the base URL its recipe is given
	// Requests is the bodies of the agent's turn requests so far (side
	// requests without tools excluded), in order.
	Requests func() []json.RawMessage
	// Arrived gets a value per turn request (buffered).
	Arrived <-chan struct{}
	// Push appends steps to the script.
	Push func(steps ...Step)
}

// NewModel starts the scripted model a's API calls, answering steps in
// order ("ok" once they are used up); it stops with the test.
func (a *Agent) NewModel(t testing.TB, steps ...Step) *Model {
	t.Helper()
	n := 0
	id := func() string { n++; return fmt.Sprintf("call_%d", n) }
	switch a.API {
	case ChatCompletions:
		conv := func(s Step) chatmodel.Reply {
			switch {
			case s.Shell != "":
				return chatmodel.Call(id(), a.ShellTool, a.ShellArgs(s.Shell))
			case s.Stall != nil:
				return chatmodel.Stalled(s.Stall, s.Deltas[0])
			}
			return chatmodel.Text(s.Deltas...)
		}
		m := chatmodel.New(t, mapSteps(steps, conv)...)
		return &Model{URL: m.URL, Arrived: m.Arrived(), Requests: func() []json.RawMessage { return m.Bodies() },
			Push: func(s ...Step) { m.Server.Push(mapSteps(s, conv)...) }}
	case GeminiAPI:
		conv := func(s Step) geminimodel.Reply {
			switch {
			case s.Shell != "":
				return geminimodel.Call(a.ShellTool, a.ShellArgs(s.Shell))
			case s.Stall != nil:
				return geminimodel.Stalled(s.Stall, s.Deltas[0])
			}
			return geminimodel.Text(s.Deltas...)
		}
		m := geminimodel.New(t, mapSteps(steps, conv)...)
		return &Model{URL: m.URL, Arrived: m.Arrived(), Requests: func() []json.RawMessage { return m.Bodies() },
			Push: func(s ...Step) { m.Server.Push(mapSteps(s, conv)...) }}
	default:
		conv := func(s Step) claudetest.Reply {
			switch {
			case s.Shell != "":
				return claudetest.Tool("toolu_"+id(), a.ShellTool, a.ShellArgs(s.Shell))
			case s.Stall != nil:
				return claudetest.Reply{Deltas: []string{s.Deltas[0], " never"}, Stall: s.Stall, StallAfter: 1}
			}
			return claudetest.Text(s.Deltas...)
		}
		m := claudetest.NewModel(t, mapSteps(steps, conv)...)
		return &Model{URL: m.URL, Arrived: m.Arrived(), Requests: func() []json.RawMessage { return m.Bodies() },
			Push: func(s ...Step) { m.Server.Push(mapSteps(s, conv)...) }}
	}
}

func mapSteps[R any](steps []Step, conv func(Step) R) []R {
	var rs []R
	for _, s := range steps {
		rs = append(rs, conv(s))
	}
	return rs
}

// ToolNames is the names of the tools a request body offers the model
// (Chat Completions tools[].function.name, Gemini
// tools[].functionDeclarations[].name, Messages tools[].name).
func ToolNames(body json.RawMessage) []string {
	var b struct {
		Tools []struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(body, &b)
	var names []string
	for _, t := range b.Tools {
		switch {
		case t.Function.Name != "":
			names = append(names, t.Function.Name)
		case t.Name != "":
			names = append(names, t.Name)
		}
		for _, f := range t.FunctionDeclarations {
			names = append(names, f.Name)
		}
	}
	return names
}
