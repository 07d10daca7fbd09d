package deploy_test

// The version a binary reports, as each way of building idgen stamps it:
// `make build` (git describe through -X), and the module version the Go
// toolchain records, which is what `go install …/cmd/idgen@vX.Y.Z` gives.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoCopy copies the files of the repository (committed or not, minus
// what .gitignore leaves out) into a fresh Git repository with one commit
// tagged tag, and returns its directory.
func repoCopy(t *testing.T, tag string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted, not yet committed
		} else if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "copy")
	git(t, dir, "tag", tag)
	return dir
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// version runs `bin version` and returns the version it reports.
func version(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").CombinedOutput()
	m := regexp.MustCompile(`^idgen (\S+) \(go`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("%s version: %q (%v), want idgen VERSION (go…)", bin, out, err)
	}
	return string(m[1])
}

// TestReleaseVersion builds idgen from a tagged copy of the repository: as
// the Go toolchain does for a module version (go install …@v0.8.7 records
// the tag as the main module's version; a build in a Git checkout records
// it the same way), and with `make build` one commit after the tag, which
// stamps git describe.
func TestReleaseVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds idgen twice")
	}
	const tag = "v0.8.7"
	dir := repoCopy(t, tag)
	env := append(os.Environ(), "GOFLAGS=-buildvcs=true")

	t.Run("module version", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "idgen")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/idgen")
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		if got := version(t, bin); got != tag {
			t.Errorf("idgen version of a build at tag %s: got %s, want %s", tag, got, tag)
		}
	})

	t.Run("make build", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte("after the tag\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "commit", "-q", "-am", "after the tag")
		commit := git(t, dir, "rev-parse", "--short", "HEAD")
		bin := filepath.Join(t.TempDir(), "idgen")
		cmd := exec.Command("make", "build", "BIN="+bin)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("make build: %v\n%s", err, out.String())
		}
		want := tag + "-1-g" + commit
		if got := version(t, bin); got != want {
			t.Errorf("idgen version after make build: got %s, want %s (git describe)", got, want)
		}
	})
}
