package main

import (
	"bytes"
	"testing"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/rpc"
)

// TestOpenRPCCommand: `sessiond openrpc` prints rpc.discover's document.
func TestOpenRPCCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"openrpc"}, nil, &out, &errb); code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !bytes.Equal(out.Bytes(), rpc.OpenRPC()) {
		t.Fatal("sessiond openrpc printed something other than the document")
	}
	if code := run([]string{"openrpc", "x"}, nil, &out, &errb); code != exitcode.Usage {
		t.Fatalf("extra argument: exit %d, want %d", code, exitcode.Usage)
	}
}
