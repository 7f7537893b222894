// Command serve runs a test sshd (package sshtest) for tests outside Go
// (the TypeScript client's): it prints one JSON line {host, config, binDir}
// once sshd listens and stops it when its stdin closes.
//
//	serve --sessiond BIN [--env KEY=value]…
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sessiond/sessiond/internal/testkit/sshtest"
)

type envFlag []string

func (e *envFlag) String() string     { return strings.Join(*e, " ") }
func (e *envFlag) Set(v string) error { *e = append(*e, v); return nil }

func main() {
	bin := flag.String("sessiond", "", "the sessiond binary sessions on the server find on PATH")
	var env envFlag
	flag.Var(&env, "env", "KEY=value for sessions on the server (repeatable)")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "sshtest serve: --sessiond is required")
		os.Exit(2)
	}
	s, err := sshtest.Run(*bin, env...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sshtest serve:", err)
		os.Exit(1)
	}
	defer s.Close()
	json.NewEncoder(os.Stdout).Encode(map[string]string{"host": sshtest.Host, "config": s.Config, "binDir": s.BinDir})
	io.Copy(io.Discard, os.Stdin)
}
