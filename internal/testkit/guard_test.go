// Package testkit holds test support only, in its subpackages: daemon
// starters, model servers, npm installs, provider scenarios, frame
// readers. Its one test is the guard that keeps it that way.
package testkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const (
	module  = "github.com/sessiond/sessiond"
	testkit = module + "/internal/testkit"
)

// mayUseTestkit are the packages outside internal/testkit allowed to
// import it: cmd/sessiond-bench is a benchmark tool, not the product; it
// starts the real CLIs through codextest and claudetest.
var mayUseTestkit = map[string]bool{
	module + "/cmd/sessiond-bench": true,
}

type listed struct {
	ImportPath string
	Imports    []string // of the non-test files
	Deps       []string // transitive, of the non-test files
}

// list is `go list -deps -json` over the whole module for goos: every
// package, with what its non-test files import.
func list(t *testing.T, goos string) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Deps", module+"/...")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list (GOOS=%s): %v\n%s", goos, err, stderr.Bytes())
	}
	var pkgs []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.ImportPath == module || strings.HasPrefix(p.ImportPath, module+"/") {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package of the module")
	}
	return pkgs
}

func inTestkit(path string) bool { return path == testkit || strings.HasPrefix(path, testkit+"/") }

// TestProductNeverImportsTestkit: no package outside internal/testkit
// (cmd/sessiond and every other internal/ package; cmd/sessiond-bench
// excepted) imports anything under internal/testkit, directly or through
// another package, and none imports "testing" in a non-test file: that is
// what marks a test-support package, and those live under internal/testkit.
// Both the Linux and the macOS build are checked.
func TestProductNeverImportsTestkit(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		pkgs := list(t, goos)
		byPath := make(map[string]listed, len(pkgs))
		for _, p := range pkgs {
			byPath[p.ImportPath] = p
		}
		for _, p := range pkgs {
			if inTestkit(p.ImportPath) {
				continue
			}
			for _, imp := range p.Imports {
				if imp == "testing" {
					t.Errorf("GOOS=%s: %s imports testing outside its _test.go files: test support belongs under internal/testkit", goos, p.ImportPath)
				}
			}
			if mayUseTestkit[p.ImportPath] {
				continue
			}
			for _, dep := range p.Deps {
				if inTestkit(dep) {
					t.Errorf("GOOS=%s: product package %s imports %s %s: product code never imports test support", goos, p.ImportPath, dep, via(byPath, p, dep))
				}
			}
		}
	}
}

// via says how p reaches dep: directly, or through which of its imports.
func via(byPath map[string]listed, p listed, dep string) string {
	var through []string
	for _, imp := range p.Imports {
		if imp == dep {
			return "directly"
		}
		if slices.Contains(byPath[imp].Deps, dep) {
			through = append(through, imp)
		}
	}
	return "through " + strings.Join(through, ", ")
}
