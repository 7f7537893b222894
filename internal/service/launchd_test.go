package service

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"

	launchdagent "github.com/sessiond/sessiond/contrib/launchd"
)

// TestLaunchdAgent: the macOS agent is contrib/launchd's file with the
// binary and the log file put in, escaped so the plist stays well-formed
// XML naming exactly those paths; relative paths and control characters
// are refused.
func TestLaunchdAgent(t *testing.T) {
	exe := "/Users/a b/R&D <x>/sessiond"
	logf := "/Users/a b/Library/Logs/sessiond.log"
	text, err := renderAgent(launchdagent.Plist, exe, logf)
	if err != nil {
		t.Fatal(err)
	}
	var strs []string
	dec := xml.NewDecoder(strings.NewReader(text))
	inString := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, text)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			inString = v.Name.Local == "string"
		case xml.CharData:
			if inString {
				strs = append(strs, string(v))
			}
		case xml.EndElement:
			inString = false
		}
	}
	want := []string{"dev.sessiond", exe, "serve", "Background", logf}
	if strings.Join(strs, "|") != strings.Join(want, "|") {
		t.Fatalf("plist strings %q, want %q", strs, want)
	}
	if strings.Contains(text, launchdagent.TemplateBinary) || strings.Contains(text, launchdagent.TemplateLog) {
		t.Fatal("a template path is left in the agent")
	}
	for _, bad := range []string{"sessiond", "/bin/ses\nsiond"} {
		if _, err := renderAgent(launchdagent.Plist, bad, logf); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
	if got := launchdService.next("/Users/a b/Library/LaunchAgents"); !strings.Contains(got, "launchctl bootstrap gui/$(id -u) '/Users/a b/Library/LaunchAgents/dev.sessiond.plist'") {
		t.Fatalf("next steps: %s", got)
	}
}
