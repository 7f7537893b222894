package service

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	launchdagent "github.com/sessiond/sessiond/contrib/launchd"
	"github.com/sessiond/sessiond/internal/tty"
)

// launchdService: the agent of contrib/launchd in ~/Library/LaunchAgents,
// naming the binary and a log file in ~/Library/Logs.
var launchdService = serviceKind{
	dir: agentDir,
	plan: func(dir, exe string) ([]unitPlan, error) {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no home directory for the log file: %w", err)
		}
		text, err := renderAgent(launchdagent.Plist, exe, filepath.Join(home, "Library", "Logs", "sessiond.log"))
		if err != nil {
			return nil, err
		}
		u, err := planFile(filepath.Join(dir, launchdagent.Name), text)
		if err != nil {
			return nil, fmt.Errorf("agent %w", err)
		}
		return []unitPlan{u}, nil
	},
	next: func(dir string) string {
		p := filepath.Join(dir, launchdagent.Name)
		return "  launchctl bootstrap gui/$(id -u) " + shellQuote(p) + "\n  launchctl kickstart gui/$(id -u)/dev.sessiond\n"
	},
}

// agentDir is ~/Library/LaunchAgents.
func agentDir(func(string) string) (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory: %w", err)
	}
	return filepath.Join(home, "Library", "LaunchAgents"), nil
}

// renderAgent puts exe and the log file into the plist, escaped for XML.
func renderAgent(tmpl, exe, logFile string) (string, error) {
	for _, p := range []string{exe, logFile} {
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("path %q is not absolute", prefixOf(p))
		}
		for _, r := range p {
			if r < 0x20 || r == 0x7f {
				return "", fmt.Errorf("path %s holds a control character", tty.Safe(prefixOf(p)))
			}
		}
	}
	s := strings.Replace(tmpl, "<string>"+launchdagent.TemplateBinary+"</string>", "<string>"+xmlText(exe)+"</string>", 1)
	return strings.Replace(s, "<string>"+launchdagent.TemplateLog+"</string>", "<string>"+xmlText(logFile)+"</string>", 1), nil
}

// xmlText escapes s for a plist <string>.
func xmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if !strings.ContainsAny(s, " \t'\"\\$`;&|<>()*?[]#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
