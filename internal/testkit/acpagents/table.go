package acpagents

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ProviderTable is a [providers.NAME] table of the daemon's config
// running the recipe as an ACP agent (protocol "acp"), its environment
// and the authenticate method, if any, in the table.
func (r Recipe) ProviderTable(name string) string {
	var cmd []string
	for _, a := range r.Command {
		cmd = append(cmd, strconv.Quote(a))
	}
	var kv []string
	for k, v := range r.Env {
		kv = append(kv, fmt.Sprintf("%s = %q", k, v))
	}
	sort.Strings(kv)
	table := fmt.Sprintf("[providers.%s]\ncommand = [%s]\nprotocol = \"acp\"\nenv = { %s }\n",
		name, strings.Join(cmd, ", "), strings.Join(kv, ", "))
	if r.AuthMethod != "" {
		table += fmt.Sprintf("auth_method = %q\n", r.AuthMethod)
	}
	return table
}
