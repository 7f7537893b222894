package main

import (
	"fmt"
	"io"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/provider/echo"
)

func providerCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "echo" {
		fmt.Fprintln(stderr, "usage: sessiond provider echo [--ignore-sigterm] [--ignore-eof] [--exit-at-start] [--slow-start MS]")
		return exitcode.Usage
	}
	return echo.Main(args[1:], stdin, stdout)
}
