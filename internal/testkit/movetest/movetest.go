// Package movetest holds what the providers' Move tests share: an
// account's environment as a Move reads it, and files written and read
// back whole.
package movetest

import (
	"os"
	"path/filepath"
	"testing"
)

// Env is an account's environment as a Move reads it, from pairs
// k1, v1, k2, v2, …: "" for a key not given.
func Env(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

// WriteFile writes s to p (0600), making its directories (0700).
func WriteFile(t testing.TB, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ReadFile is p's content.
func ReadFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
