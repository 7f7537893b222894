package main

import (
	"fmt"
	"io"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
)

// openrpcCmd prints the document rpc.discover answers.
func openrpcCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "usage: sessiond openrpc")
		return exitcode.Usage
	}
	if _, err := stdout.Write(rpc.OpenRPC()); err != nil {
		fmt.Fprintln(stderr, "sessiond openrpc:", err)
		return exitcode.Error
	}
	return exitcode.OK
}
