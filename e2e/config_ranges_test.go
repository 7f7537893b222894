package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// TestE2EConfigOutOfRange: a duration or size outside its range stops
// `sessiond serve` before it listens, exit 1, with one log line naming the
// key, the value (a short prefix of it) and the range. step_timeout =
// "1000000h" is the value that used to overflow the shutdown budget.
func TestE2EConfigOutOfRange(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"step_timeout", "step_timeout = \"1000000h\"\n", `step_timeout = \"1000000h\": want a duration from 100ms to 1h`},
		{"idle_timeout", "idle_timeout = \"721h\"\n", `idle_timeout = \"721h\": want a duration from 1ms to 720h`},
		{"ladder.kill_timeout", "[ladder]\nkill_timeout = \"0s\"\n", `ladder.kill_timeout = \"0s\": want a duration from 100ms to 10m`},
		{"ladder.grace", "[ladder]\ngrace = \"11m\"\n", `ladder.grace = \"11m\": want a duration from 0 to 10m`},
		{"max_message_bytes", "max_message_bytes = 1024\n", `max_message_bytes = 1024: want 4096 .. 67108864`},
		{"long value", "write_timeout = \"" + strings.Repeat("7", 4000) + "h\"\n", `write_timeout = \"` + strings.Repeat("7", 64) + `…\": want a duration from 100ms to 1h`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "c.toml")
			if err := os.WriteFile(cfg, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(t.TempDir(), "s")
			code, out := runDaemonExpectExit(t, "--config", cfg, "--socket", sock, "--state-dir", t.TempDir())
			if code != exitcode.Error || strings.Count(out, tc.want) != 1 || !strings.Contains(out, `"msg":"bad configuration"`) {
				t.Fatalf("exit %d, want %d and one line naming %s; output:\n%.2000s", code, exitcode.Error, tc.want, out)
			}
			if len(out) > 1000 {
				t.Fatalf("the refusal echoes too much (%d bytes):\n%.2000s", len(out), out)
			}
			if _, err := os.Stat(sock); err == nil {
				t.Fatal("a refused config left a socket")
			}
		})
	}
}

// maximaConfig is every duration and size at the top of its range, but
// for the ladder (given).
const maximaConfig = "idle_timeout = \"720h\"\nstart_timeout = \"1h\"\nstep_timeout = \"1h\"\nwrite_timeout = \"1h\"\n" +
	"initialize_timeout = \"1h\"\nmax_message_bytes = 67108864\nmax_outbound_bytes = 1099511627776\n" +
	"max_connections = 1048576\n"

// TestE2EShutdownAtConfigMaxima: with every duration and size at the top
// of its range, SIGTERM still evicts: the daemon exits 0 and nothing it
// started outlives it. With a short ladder (not ten minutes per rung) the
// session's provider left a descendant that ignores SIGTERM, so the
// whole ladder is climbed; with the ladder at its maxima too, a provider
// that exits on stdin EOF. (With step_timeout = "1000000h", before the
// ranges, the shutdown budget wrapped negative: SIGTERM gave up within
// 60 ms, exit 1, the descendant kept running.)
func TestE2EShutdownAtConfigMaxima(t *testing.T) {
	t.Run("short ladder, stubborn descendant", func(t *testing.T) {
		shutdownEvicts(t, maximaConfig+"[ladder]\ngrace = \"100ms\"\nterm_timeout = \"300ms\"\nkill_timeout = \"1s\"\n", "/orphan")
	})
	t.Run("ladder at its maxima", func(t *testing.T) {
		shutdownEvicts(t, maximaConfig+"[ladder]\ngrace = \"10m\"\nterm_timeout = \"10m\"\nkill_timeout = \"10m\"\n", "hello")
	})
}

// shutdownEvicts runs a held echo session's turn (text), SIGTERMs the
// daemon and checks it exits 0 with no process of its own left.
func shutdownEvicts(t *testing.T, cfg, text string) {
	shutdownEvictsOn(t, daemontest.Start(t, daemontest.Options{Config: cfg}), text, syscall.SIGTERM)
}

// shutdownEvictsOn is shutdownEvicts on a running daemon d, stopped by sig.
func shutdownEvictsOn(t *testing.T, d *daemontest.Daemon, text string, sig syscall.Signal) {
	rec := newRecorder()
	c, err := rpc.Dial(ctx10(t), d.Socket, rpc.ClientOptions{Name: "e2e-maxima", OnNotify: rec.onNotify})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s api.SessionInfo
	if err := c.Call(ctx10(t), "agentSession.create", api.CreateParams{Provider: "echo", Cwd: t.TempDir()}, &s); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.attach", api.AttachParams{SessionID: s.SessionID}, nil); err != nil {
		t.Fatal(err)
	}
	var h api.HoldResult
	if err := c.Call(ctx10(t), "agentSession.hold", api.HoldParams{SessionID: s.SessionID, HolderID: "t"}, &h); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx10(t), "agentSession.send", api.SendParams{SessionID: s.SessionID, Text: text}, nil); err != nil {
		t.Fatal(err)
	}
	// The echo provider starts an /orphan descendant before it answers:
	// once the turn completed, it runs.
	waitEvent(t, rec.ch, event.TurnCompleted)
	tagged := daemontest.TaggedProcesses(d.StateID)
	if text == "/orphan" && !slices.ContainsFunc(tagged, func(p int) bool { return p != h.PID }) {
		t.Fatalf("no /orphan descendant among the tagged processes %v (provider %d)", tagged, h.PID)
	}
	d.Cmd.Process.Signal(sig)
	if code := d.Wait(60 * time.Second); code != 0 {
		t.Fatalf("exit %d after %v, want 0:\n%s", code, sig, d.Log.String())
	}
	for _, pid := range tagged {
		if daemontest.Running(pid) {
			t.Fatalf("process %d (provider %d) outlived the daemon:\n%s", pid, h.PID, d.Log.String())
		}
	}
	if left := daemontest.TaggedProcesses(d.StateID); len(left) != 0 {
		t.Fatalf("tagged processes left after the daemon exited: %v", left)
	}
	msgs, _ := logMsgs(t, d.Log.String())
	if slices.Contains(msgs, "shutdown left work undone") || !slices.Contains(msgs, "stopped") {
		t.Fatalf("shutdown did not finish cleanly: %v", msgs)
	}
}

// TestE2EConfigNotRegular: `--config /dev/zero` is refused at once (it
// used to be read until the daemon reached 1.7 GB), exit 1, one line.
func TestE2EConfigNotRegular(t *testing.T) {
	code, out := runDaemonExpectExit(t, "--config", "/dev/zero", "--socket", filepath.Join(t.TempDir(), "s"), "--state-dir", t.TempDir())
	if code != exitcode.Error || !strings.Contains(out, "config /dev/zero: config is not a regular file (a device)") || len(out) > 1000 {
		t.Fatalf("exit %d, want %d and one line refusing /dev/zero:\n%.2000s", code, exitcode.Error, out)
	}
}
