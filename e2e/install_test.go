package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/exitcode"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// installHomes is each test's HOME for install-service (where the
// binary goes by default), made once per test.
var installHomes sync.Map // testing.TB -> string

func installHome(t testing.TB) string {
	if h, ok := installHomes.Load(t); ok {
		return h.(string)
	}
	h := t.TempDir()
	installHomes.Store(t, h)
	t.Cleanup(func() { installHomes.Delete(t) })
	return h
}

// runInstall runs `sessiond install-service ARGS` with XDG_CONFIG_HOME=cfg
// and HOME=installHome(t).
func runInstall(t *testing.T, cfg string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(daemontest.Binary(t), append([]string{"install-service"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+cfg, "HOME="+installHome(t))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// TestE2EInstallService: the running binary is copied to
// ~/.local/bin/sessiond (it runs and reports the same version); the units
// written are the contrib/systemd files with ExecStart naming that copy;
// a second run changes nothing; a unit edited since is never replaced
// without --force; --dry-run writes nothing.
func TestE2EInstallService(t *testing.T) {
	bin := filepath.Join(installHome(t), ".local", "bin", "sessiond")
	cfg := t.TempDir()
	dir := filepath.Join(cfg, "systemd", "user")
	next := "systemctl --user daemon-reload\n  systemctl --user enable --now sessiond.socket\n"

	code, out, errOut := runInstall(t, cfg, "--dry-run")
	if code != 0 || !strings.Contains(out, "would write "+filepath.Join(dir, "sessiond.service")) || !strings.Contains(out, next) {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("--dry-run created the unit directory")
	}
	if _, err := os.Stat(bin); err == nil {
		t.Fatal("--dry-run installed the binary")
	}

	code, out, errOut = runInstall(t, cfg)
	if code != 0 || !strings.Contains(out, next) || !strings.Contains(out, "wrote "+bin) {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed binary: %v %v", fi, err)
	}
	if got, want := daemontest.ReportedVersion(t, bin), daemontest.ReportedVersion(t, daemontest.Binary(t)); got != want {
		t.Fatalf("the installed binary reports %s, the one that ran %s", got, want)
	}
	for _, name := range []string{"sessiond.socket", "sessiond.service"} {
		contrib, err := os.ReadFile(filepath.Join("..", "contrib", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(string(contrib), "ExecStart=/usr/local/bin/sessiond serve", "ExecStart="+bin+" serve")
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("%s written:\n%s\nwant the contrib file with this binary:\n%s", name, got, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sessiond.service")); !strings.Contains(string(b), "\nExecStart="+bin+" serve\n") {
		t.Fatalf("ExecStart does not name %s:\n%s", bin, b)
	}

	code, out, _ = runInstall(t, cfg)
	if code != 0 || strings.Count(out, "unchanged ") != 3 {
		t.Fatalf("second install: exit %d\n%s", code, out)
	}

	edited := filepath.Join(dir, "sessiond.service")
	os.WriteFile(edited, []byte("# mine\n"), 0o644)
	for _, args := range [][]string{nil, {"--dry-run"}} {
		code, _, errOut = runInstall(t, cfg, args...)
		if code != exitcode.Error || !strings.Contains(errOut, edited) || !strings.Contains(errOut, "--force") {
			t.Fatalf("edited unit %v: exit %d, stderr:\n%s", args, code, errOut)
		}
		if b, _ := os.ReadFile(edited); string(b) != "# mine\n" {
			t.Fatalf("an edited unit was replaced without --force (%v)", args)
		}
	}
	code, out, errOut = runInstall(t, cfg, "--force")
	if code != 0 || !strings.Contains(out, "replaced "+edited) {
		t.Fatalf("--force: exit %d\n%s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(edited); !strings.Contains(string(b), "Type=notify") {
		t.Fatal("--force did not write the unit")
	}
	// A dangling symlink in the unit's place is someone's entry too.
	os.Remove(edited)
	if err := os.Symlink("/nonexistent/sessiond.service", edited); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut = runInstall(t, cfg); code != exitcode.Error || !strings.Contains(errOut, "--force") {
		t.Fatalf("dangling symlink unit: exit %d, stderr:\n%s", code, errOut)
	}
	if fi, err := os.Lstat(edited); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced without --force: %v", err)
	}
}

// TestE2EInstallServiceHostile: a masked unit (a symlink to /dev/null) is
// named as masked and left alone without --force, --force replaces the link
// and not its target; a unit directory that is a file, or a unit that is a
// directory, is exit 1 naming the path; control characters in the paths
// are escaped; --dry-run writes nothing in any of these.
func TestE2EInstallServiceHostile(t *testing.T) {
	cfg := t.TempDir()
	dir := filepath.Join(cfg, "systemd", "user")
	os.MkdirAll(dir, 0o755)
	sock := filepath.Join(dir, "sessiond.socket")
	if err := os.Symlink(os.DevNull, sock); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--dry-run"}} {
		code, _, errOut := runInstall(t, cfg, args...)
		if code != exitcode.Error || !strings.Contains(errOut, sock+" is masked") || !strings.Contains(errOut, "systemctl --user unmask sessiond.socket") {
			t.Fatalf("masked unit %v: exit %d\n%s", args, code, errOut)
		}
		if l, err := os.Readlink(sock); err != nil || l != os.DevNull {
			t.Fatalf("the mask was touched (%v): %q %v", args, l, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "sessiond.service")); err == nil {
			t.Fatalf("%v wrote the service unit although the socket unit was refused", args)
		}
	}
	if code, out, errOut := runInstall(t, cfg, "--force"); code != 0 || !strings.Contains(out, "replaced "+sock) {
		t.Fatalf("--force over a mask: exit %d\n%s%s", code, out, errOut)
	}
	if fi, err := os.Lstat(sock); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("--force left %v, %v; want the unit file in place of the link", fi, err)
	}
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer the null device: %v", os.DevNull, err)
	}

	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o644)
	if code, _, errOut := runInstall(t, file); code != exitcode.Error || !strings.Contains(errOut, file) || !strings.Contains(errOut, "not a directory") {
		t.Fatalf("unit dir under a file: exit %d\n%s", code, errOut)
	}
	cfg2 := t.TempDir()
	os.MkdirAll(filepath.Join(cfg2, "systemd", "user", "sessiond.service"), 0o755)
	if code, _, errOut := runInstall(t, cfg2); code != exitcode.Error || !strings.Contains(errOut, "is a directory") {
		t.Fatalf("unit that is a directory: exit %d\n%s", code, errOut)
	}
	evil := filepath.Join(file, "x\x1b[31mred")
	code, _, errOut := runInstall(t, evil)
	if code != exitcode.Error || strings.Contains(errOut, "\x1b") || !strings.Contains(errOut, `x\x1b[31mred`) {
		t.Fatalf("control characters in the path: exit %d\n%q", code, errOut)
	}
}

// TestE2EInstallServiceBinary: --binary inside a git work tree (a real
// `git init`) is refused naming the tree and the fix, and nothing is
// written; --binary elsewhere is what ExecStart names; a different file
// there is not replaced without --force (nothing written), --force
// replaces it.
func TestE2EInstallServiceBinary(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git not found: install it (apt-get install git)")
	}
	repo := t.TempDir()
	if out, err := exec.Command(git, "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	cfg := t.TempDir()
	units := filepath.Join(cfg, "systemd", "user")
	inRepo := filepath.Join(repo, "bin", "sessiond")
	for _, args := range [][]string{{"--binary", inRepo}, {"--binary", inRepo, "--dry-run"}, {"--binary", inRepo, "--force"}} {
		code, out, errOut := runInstall(t, cfg, args...)
		for _, want := range []string{inRepo, "inside a git work tree (" + repo + ")", "outside the work tree (the default ~/.local/bin/sessiond, or --binary PATH)"} {
			if code != exitcode.Error || !strings.Contains(errOut, want) {
				t.Fatalf("%v: exit %d, stderr %q does not say %q\n%s", args, code, errOut, want, out)
			}
		}
	}
	if _, err := os.Stat(units); err == nil {
		t.Fatal("a refused install wrote units")
	}
	if _, err := os.Stat(inRepo); err == nil {
		t.Fatal("a refused install wrote the binary")
	}

	to := filepath.Join(t.TempDir(), "opt", "sessiond")
	os.MkdirAll(filepath.Dir(to), 0o755)
	os.WriteFile(to, []byte("#!/bin/sh\necho other\n"), 0o755)
	code, out, errOut := runInstall(t, cfg, "--binary", to)
	if code != exitcode.Error || !strings.Contains(errOut, to+" differs from this binary") || !strings.Contains(errOut, "--force") {
		t.Fatalf("a different binary in place: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(units); err == nil {
		t.Fatal("a refused binary still let the units be written")
	}
	code, out, errOut = runInstall(t, cfg, "--binary", to, "--force")
	if code != 0 || !strings.Contains(out, "replaced "+to) {
		t.Fatalf("--force: exit %d\n%s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(units, "sessiond.service")); !strings.Contains(string(b), "\nExecStart="+to+" serve\n") {
		t.Fatalf("ExecStart does not name %s:\n%s", to, b)
	}
	if got, want := daemontest.ReportedVersion(t, to), daemontest.ReportedVersion(t, daemontest.Binary(t)); got != want {
		t.Fatalf("the installed binary reports %s, want %s", got, want)
	}
}

// TestE2EInstallServiceBinarySymlink: ~/.local/bin/sessiond already a
// symlink into a git checkout (to a file with this binary's bytes) is not
// "unchanged": it is refused naming the link, its target's work tree and
// --force, nothing written; --force replaces the link with a real copy
// and leaves the checkout's file alone. --binary naming where a unit goes
// (the service or socket unit, through a symlinked directory too) is
// refused before anything is written.
func TestE2EInstallServiceBinarySymlink(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git not found: install it (apt-get install git)")
	}
	repo := t.TempDir()
	if out, err := exec.Command(git, "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	built := filepath.Join(repo, "bin", "sessiond")
	os.MkdirAll(filepath.Dir(built), 0o755)
	copyFile(t, daemontest.Binary(t), built)
	bin := filepath.Join(installHome(t), ".local", "bin", "sessiond")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.Symlink(built, bin); err != nil {
		t.Fatal(err)
	}
	cfg := t.TempDir()
	units := filepath.Join(cfg, "systemd", "user")
	for _, args := range [][]string{nil, {"--dry-run"}} {
		code, out, errOut := runInstall(t, cfg, args...)
		for _, want := range []string{bin + " is a symlink to " + built, "inside a git work tree (" + repo + ")", "--force replaces the link with a copy"} {
			if code != exitcode.Error || !strings.Contains(errOut, want) {
				t.Fatalf("%v: exit %d, stderr does not say %q:\n%s%s", args, code, want, out, errOut)
			}
		}
	}
	if _, err := os.Stat(units); err == nil {
		t.Fatal("a refused install wrote units")
	}
	if l, err := os.Readlink(bin); err != nil || l != built {
		t.Fatalf("the link was touched: %q %v", l, err)
	}
	code, out, errOut := runInstall(t, cfg, "--force")
	if code != 0 || !strings.Contains(out, "replaced "+bin) {
		t.Fatalf("--force over the link: exit %d\n%s%s", code, out, errOut)
	}
	if fi, err := os.Lstat(bin); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("--force left %v, %v; want a copy in place of the link", fi, err)
	}
	if fi, err := os.Lstat(built); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the checkout's binary is gone: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(units, "sessiond.service")); !strings.Contains(string(b), "\nExecStart="+bin+" serve\n") {
		t.Fatalf("ExecStart does not name %s:\n%s", bin, b)
	}
	if got, want := daemontest.ReportedVersion(t, bin), daemontest.ReportedVersion(t, daemontest.Binary(t)); got != want {
		t.Fatalf("the installed copy reports %s, want %s", got, want)
	}

	fresh := t.TempDir()
	linked := filepath.Join(t.TempDir(), "cfg")
	if err := os.Symlink(fresh, linked); err != nil {
		t.Fatal(err)
	}
	freshUnits := filepath.Join(fresh, "systemd", "user")
	for _, to := range []string{
		filepath.Join(freshUnits, "sessiond.service"),
		filepath.Join(freshUnits, "sessiond.socket"),
		filepath.Join(linked, "systemd", "user", "sessiond.service"),
	} {
		for _, args := range [][]string{{"--binary", to}, {"--binary", to, "--force"}, {"--binary", to, "--dry-run"}} {
			code, out, errOut := runInstall(t, fresh, args...)
			if code != exitcode.Error || !strings.Contains(errOut, "that is where the unit") || !strings.Contains(errOut, "pass another path") {
				t.Fatalf("%v: exit %d, want the unit path refused:\n%s%s", args, code, out, errOut)
			}
		}
	}
	if _, err := os.Stat(freshUnits); err == nil {
		t.Fatal("a refused --binary wrote something where the units go")
	}
}

// TestE2EInstallServiceDanglingDir: a unit directory or binary directory
// reached through a symlink whose target does not exist is refused naming
// the link, by --dry-run as by the real run (which used to write the
// binary, then fail on the units), and nothing is written.
func TestE2EInstallServiceDanglingDir(t *testing.T) {
	cfg := t.TempDir()
	missing := filepath.Join(cfg, "nowhere")
	link := filepath.Join(cfg, "systemd")
	if err := os.Symlink(missing, link); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "bin", "sessiond")
	for _, args := range [][]string{{"--dry-run"}, nil} {
		code, out, errOut := runInstall(t, cfg, append(args, "--binary", to)...)
		if code != exitcode.Error || !strings.Contains(errOut, link+" is a symlink to "+missing+", which does not exist") || strings.Contains(out, "would write") {
			t.Fatalf("%v over a dangling unit directory link: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if _, err := os.Lstat(to); err == nil {
		t.Fatal("the binary was written although the units could not be")
	}
	if _, err := os.Lstat(missing); err == nil {
		t.Fatal("the link's target was created")
	}

	binLink := filepath.Join(t.TempDir(), "bin")
	if err := os.Symlink(filepath.Join(filepath.Dir(binLink), "gone"), binLink); err != nil {
		t.Fatal(err)
	}
	cfg2 := t.TempDir()
	for _, args := range [][]string{{"--dry-run"}, nil} {
		code, out, errOut := runInstall(t, cfg2, append(args, "--binary", filepath.Join(binLink, "sessiond"))...)
		if code != exitcode.Error || !strings.Contains(errOut, binLink+" is a symlink to") || strings.Contains(out, "would write") {
			t.Fatalf("%v over a dangling binary directory link: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg2, "systemd")); err == nil {
		t.Fatal("units were written although the binary could not be")
	}
}
