package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// What the file may hold, checked on a generic decode before the typed one
// (BurntSushi/toml matches struct fields case-insensitively and names a
// type mismatch only by Go types): keys are matched exactly, a value of
// the wrong type is refused naming the key, the type it wants and its
// range, and no error echoes more than a short prefix of a key or value.

// kind is the TOML type a key wants.
type kind int

const (
	kindDuration  kind = iota // a duration string, range in DurationRanges
	kindSize                  // an integer, range in SizeRanges
	kindString                // any string
	kindStrings               // an array of strings
	kindStringMap             // a table of strings
	kindTable                 // a table of the keys in sub
	kindTables                // a table of tables, each of the keys in sub
	kindBool                  // true or false
)

// field is one key of the schema; want is the type and range in words
// (kinds whose want comes from a range leave it empty).
type field struct {
	kind kind
	want string
	sub  map[string]field
}

var schema = map[string]field{
	"idle_timeout":           {kind: kindDuration},
	"start_timeout":          {kind: kindDuration},
	"step_timeout":           {kind: kindDuration},
	"write_timeout":          {kind: kindDuration},
	"initialize_timeout":     {kind: kindDuration},
	"max_message_bytes":      {kind: kindSize},
	"max_outbound_bytes":     {kind: kindSize},
	"max_connections":        {kind: kindSize},
	"portable_history_bytes": {kind: kindSize},
	"keep_awake":             {kind: kindBool, want: "true or false"},
	"notify":                 {kind: kindString, want: fmt.Sprintf("a string, %q or %q", NotifyNone, NotifyDesktop)},
	"cgroup_root": {kind: kindString,
		want: fmt.Sprintf("an absolute path string of at most %d bytes", MaxCgroupRoot)},
	"ladder": {kind: kindTable, sub: map[string]field{
		"grace": {kind: kindDuration}, "term_timeout": {kind: kindDuration}, "kill_timeout": {kind: kindDuration},
	}},
	"limits": {kind: kindTable, sub: map[string]field{
		"memory": {kind: kindString, want: "a size string such as \"4GiB\" from 4MiB to 1PiB, or \"0\" for none"},
		"pids":   {kind: kindSize, want: fmt.Sprintf("an integer from %d to %d, or 0 for none", MinPidsLimit, MaxPidsLimit)},
	}},
	"providers": {kind: kindTables, sub: map[string]field{
		"command":     {kind: kindStrings, want: "an array of strings: the program and its arguments"},
		"env":         {kind: kindStringMap, want: "a table of strings"},
		"protocol":    {kind: kindString, want: fmt.Sprintf("a string, %q, %q or %q", ProtocolCodexAppServer, ProtocolClaudeStreamJSON, ProtocolACP)},
		"processes":   {kind: kindString, want: "a string, \"session\" or \"account\""},
		"auth_method": {kind: kindString, want: "a string naming one of the ACP agent's authMethods"},
		"failover":    {kind: kindStrings, want: "an array of strings: account names, in the order tried"},
		"accounts": {kind: kindTables, sub: map[string]field{
			"env": {kind: kindStringMap, want: "a table of strings"},
		}},
	}},
}

// checkSchema decodes text generically and checks it against schema.
func checkSchema(text string) error {
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		return parseError(err)
	}
	var unknown []string
	if err := checkTable(raw, schema, "", &unknown); err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: %s", ErrUnknownKey, strings.Join(unknown, ", "))
	}
	return nil
}

// checkTable checks the keys of one table (path: its dotted name and a
// dot, or ""), collecting the unknown ones.
func checkTable(t map[string]any, fields map[string]field, path string, unknown *[]string) error {
	for _, k := range slices.Sorted(maps.Keys(t)) {
		key := path + k
		f, ok := fields[k]
		if !ok {
			*unknown = append(*unknown, unknownKey(key, k, fields))
			continue
		}
		if err := checkValue(key, f, t[k], unknown); err != nil {
			return err
		}
	}
	return nil
}

// unknownKey names an unknown key, and the known one it differs from only
// in case.
func unknownKey(key, k string, fields map[string]field) string {
	for known := range fields {
		if strings.EqualFold(known, k) {
			return fmt.Sprintf("%q (keys are case-sensitive: %q)", prefix(key), known)
		}
	}
	return fmt.Sprintf("%q", prefix(key))
}

// checkValue checks v, key's value, against f.
func checkValue(key string, f field, v any, unknown *[]string) error {
	ok := true
	switch f.kind {
	case kindDuration, kindString:
		_, ok = v.(string)
	case kindSize:
		_, ok = v.(int64)
	case kindBool:
		_, ok = v.(bool)
	case kindStrings:
		a, isArr := v.([]any)
		ok = isArr
		for _, e := range a {
			if _, s := e.(string); !s {
				ok = false
			}
		}
	case kindStringMap:
		m, isMap := v.(map[string]any)
		ok = isMap
		for _, e := range m {
			if _, s := e.(string); !s {
				ok = false
			}
		}
	case kindTable:
		m, isMap := v.(map[string]any)
		if !isMap {
			return typeError(key, v, "a table")
		}
		return checkTable(m, f.sub, key+".", unknown)
	case kindTables:
		m, isMap := v.(map[string]any)
		if !isMap {
			return typeError(key, v, "a table of tables")
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			sub, isMap := m[name].(map[string]any)
			if !isMap {
				return typeError(key+"."+name, m[name], "a table")
			}
			if err := checkTable(sub, f.sub, key+"."+name+".", unknown); err != nil {
				return err
			}
		}
	}
	if !ok {
		return typeError(key, v, f.wantText(key))
	}
	return nil
}

// wantText is what key wants, in words, with its range.
func (f field) wantText(key string) string {
	switch {
	case f.want != "":
		return f.want
	case f.kind == kindDuration:
		r := durationRange(key)
		return fmt.Sprintf("a duration string from %s to %s, such as \"1500ms\" or \"2s\"", FormatDuration(r.Min), FormatDuration(r.Max))
	case f.kind == kindSize:
		r := sizeRange(key)
		return fmt.Sprintf("an integer from %d to %d", r.Min, r.Max)
	}
	return "another type"
}

// typeError: key holds v, which is not what it wants.
func typeError(key string, v any, want string) error {
	return fmt.Errorf("%w: %s = %s (a TOML %s): want %s", ErrBadValue, prefix(key), prefix(fmt.Sprintf("%#v", v)), tomlType(v), want)
}

// tomlType names v's TOML type.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any, []map[string]any:
		return "array"
	case map[string]any:
		return "table"
	}
	return "date or time"
}

// parseError is a TOML syntax error with every long word in it cut to a
// prefix (the parser quotes what it found, however long).
func parseError(err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%w: %s", ErrBadValue, capWords(err.Error()))
	}
	at := fmt.Sprintf("line %d", pe.Position.Line)
	if pe.LastKey != "" {
		at += fmt.Sprintf(" (last key %q)", prefix(pe.LastKey))
	}
	want := ""
	if f, ok := lookupField(pe.LastKey); ok && f.kind != kindTable && f.kind != kindTables {
		want = ": " + pe.LastKey + " wants " + f.wantText(pe.LastKey)
	}
	return fmt.Errorf("%w: toml: %s: %s%s", ErrBadValue, at, capWords(pe.Message), want)
}

// lookupField is the schema's field of a dotted key ("ladder.grace",
// "providers.NAME.command").
func lookupField(key string) (field, bool) {
	parts := strings.Split(key, ".")
	fields := schema
	for i := 0; i < len(parts); i++ {
		f, ok := fields[parts[i]]
		if !ok {
			return field{}, false
		}
		if i == len(parts)-1 {
			return f, true
		}
		if f.kind == kindTables {
			i++ // the table's name
			if i == len(parts)-1 {
				return field{kind: kindTable}, true
			}
		}
		fields = f.sub
	}
	return field{}, false
}

// maxErrorText bounds the text of one error taken from the parser.
const maxErrorText = 512

// capWords cuts every word of s to a prefix, and s to maxErrorText bytes.
func capWords(s string) string {
	words := strings.Split(s, " ")
	for i, w := range words {
		words[i] = prefix(w)
	}
	return prefixN(strings.Join(words, " "), maxErrorText)
}

// maxEcho is the most of a value or key an error echoes.
const maxEcho = 64

// prefix is at most 64 bytes of a bad value, for an error message, cut
// at a character boundary.
func prefix(s string) string { return prefixN(s, maxEcho) }

// prefixN is at most n bytes of s (and "…" when cut), never splitting a
// UTF-8 character.
func prefixN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
