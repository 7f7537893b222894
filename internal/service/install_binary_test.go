package service

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGitWorkTree: a .git directory or file (a linked worktree) above the
// path, through a symlink too; none above is "".
func TestGitWorkTree(t *testing.T) {
	root := t.TempDir()
	repo, linked, plain := filepath.Join(root, "repo"), filepath.Join(root, "linked"), filepath.Join(root, "plain")
	os.MkdirAll(filepath.Join(repo, ".git"), 0o755)
	os.MkdirAll(linked, 0o755)
	os.WriteFile(filepath.Join(linked, ".git"), []byte("gitdir: /elsewhere\n"), 0o644)
	os.MkdirAll(plain, 0o755)
	link := filepath.Join(plain, "to-repo")
	os.Symlink(repo, link)
	tests := []struct{ path, want string }{
		{filepath.Join(repo, "bin", "not-yet", "sessiond"), repo},
		{filepath.Join(linked, "sessiond"), linked},
		{filepath.Join(link, "bin", "sessiond"), repo},
		{filepath.Join(plain, "bin", "sessiond"), ""},
	}
	for _, tc := range tests {
		if got := gitWorkTree(tc.path); got != tc.want {
			t.Errorf("gitWorkTree(%s) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
