//go:build release

package deploy_test

// The release (make release, scripts/release.sh): the artifacts it builds
// each carry the version, its verification catches an artifact that does
// not, and it refuses what must not be released. Behind the release build
// tag because it builds idgen for two platforms and the npm package (npm
// ci): CI runs it after its dry run of make release, on that dry run's
// dist/ (IDGEN_TEST_RELEASE_DIST and IDGEN_TEST_RELEASE_VERSION); without
// them it releases v0.9.0 from a copy of the repository itself:
//
//	go test -tags release -count=1 -v -run 'TestRelease$|TestReleaseRefuses' ./deploy/

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// release runs scripts/release.sh in dir with env added to the
// environment, and returns its output and exit code.
func release(t *testing.T, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"scripts/release.sh"}, args...)...)
	cmd.Dir = dir
	// The tag's tagger, for a machine with no Git identity configured.
	cmd.Env = append(os.Environ(), "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	} else if err != nil {
		t.Fatalf("scripts/release.sh: %v", err)
	}
	return string(out), 0
}

// editFile replaces the first match of re in dir/name with repl.
func editFile(t *testing.T, dir, name, re, repl string) {
	t.Helper()
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	loc := regexp.MustCompile(re).FindIndex(data)
	if loc == nil {
		t.Fatalf("%s: no match for %s", name, re)
	}
	data = append(data[:loc[0]:loc[0]], append([]byte(repl), data[loc[1]:]...)...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// prepareRelease makes the release commit of version (X.Y.Z) in dir: the
// CHANGELOG section under the Unreleased one, and every manifest at version.
func prepareRelease(t *testing.T, dir, version, date string) {
	t.Helper()
	editFile(t, dir, "CHANGELOG.md", `(?m)^## \[Unreleased\]\n`, "## [Unreleased]\n\n## ["+version+"] - "+date+"\n")
	editFile(t, dir, "clients/typescript/package.json", `"version": "[^"]*"`, `"version": "`+version+`"`)
	editFile(t, dir, "clients/python/pyproject.toml", `(?m)^version = "[^"]*"`, `version = "`+version+`"`)
	editFile(t, dir, "clients/python/idgen_client/__init__.py", `(?m)^__version__ = "[^"]*"`, `__version__ = "`+version+`"`)
	editFile(t, dir, "deploy/helm/idgen/Chart.yaml", `(?m)^appVersion: .*`, `appVersion: "`+version+`"`)
	git(t, dir, "commit", "-q", "-am", "release "+version)
}

// releaseDist returns the dist directory of a release and its version: CI's
// dry run's, or that of a release of v0.9.0 made here from a copy of the
// repository, whose tag it checks.
func releaseDist(t *testing.T) (dist, ver string) {
	t.Helper()
	if dist := os.Getenv("IDGEN_TEST_RELEASE_DIST"); dist != "" {
		version := os.Getenv("IDGEN_TEST_RELEASE_VERSION")
		if version == "" {
			t.Fatal("IDGEN_TEST_RELEASE_DIST is set, IDGEN_TEST_RELEASE_VERSION is not")
		}
		return dist, version
	}
	const version = "v0.9.0"
	dir := repoCopy(t, "v0.8.7")
	prepareRelease(t, dir, "0.9.0", "2026-11-27")
	head := git(t, dir, "rev-parse", "HEAD")
	dist = t.TempDir()
	out, code := release(t, dir, []string{"VERSION=" + version, "DRY_RUN=0", "RELEASE_IMAGE=0", "DIST=" + dist})
	if code != 0 {
		t.Fatalf("scripts/release.sh VERSION=%s: exit %d\n%s", version, code, out)
	}
	t.Logf("scripts/release.sh VERSION=%s:\n%s", version, out)
	if got := git(t, dir, "rev-parse", version+"^{commit}"); got != head {
		t.Errorf("tag %s on %s, want %s (the commit released)", version, got, head)
	}
	if got := git(t, dir, "cat-file", "-t", version); got != "tag" {
		t.Errorf("tag %s is a %s, want an annotated tag", version, got)
	}
	if msg := git(t, dir, "tag", "-l", "--format=%(contents)", version); !strings.HasPrefix(msg, "## [0.9.0] - 2026-11-27") {
		t.Errorf("message of tag %s starts %.40q, want the CHANGELOG section", version, msg)
	}
	if !strings.Contains(out, "git push origin "+version) || !strings.Contains(out, "npm publish ") {
		t.Errorf("output does not print the commands that publish:\n%s", out)
	}
	return dist, version
}

// reportedVersion runs `bin version` and returns the version it reports.
func reportedVersion(t *testing.T, bin string) string {
	t.Helper()
	return version(t, bin)
}

// pyVersion is the Python packages' version of a release version.
func pyVersion(version string) string {
	return strings.Replace(strings.TrimPrefix(version, "v"), "-dryrun", "+dryrun", 1)
}

// tarFile returns the contents of the member name of the gzipped tar path.
func tarFile(t *testing.T, path, name string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no %s", path, name)
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Name == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

// metadataVersion is the Version field of Python core metadata.
func metadataVersion(meta []byte) string {
	m := regexp.MustCompile(`(?m)^Version: (\S+)$`).FindSubmatch(meta)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// TestRelease builds a release (or takes CI's dry run's) and checks its
// artifacts, then the script's verification of them.
func TestRelease(t *testing.T) {
	dist, version := releaseDist(t)
	t.Run("artifacts", func(t *testing.T) { checkArtifacts(t, dist, version) })
	t.Run("verify", func(t *testing.T) { checkVerify(t, dist, version) })
}

// checkArtifacts reads every artifact of the release itself (not through
// the script's own verification) and checks the version in it.
func checkArtifacts(t *testing.T, dist, version string) {
	plain, py := strings.TrimPrefix(version, "v"), pyVersion(version)

	for _, tc := range []struct {
		arch    string
		machine elf.Machine
	}{{"amd64", elf.EM_X86_64}, {"arm64", elf.EM_AARCH64}} {
		name := "idgen-" + version + "-linux-" + tc.arch
		bin := filepath.Join(t.TempDir(), "idgen")
		if err := os.WriteFile(bin, tarFile(t, filepath.Join(dist, name+".tar.gz"), name+"/idgen"), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Machine != tc.machine || f.Class != elf.ELFCLASS64 {
			t.Errorf("%s: ELF %v %v, want %v ELFCLASS64", name, f.Machine, f.Class, tc.machine)
		}
		if f.Section(".interp") != nil {
			t.Errorf("%s: has an ELF interpreter, want a static binary", name)
		}
		f.Close()
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if settings["GOARCH"] != tc.arch || settings["GOOS"] != "linux" || settings["CGO_ENABLED"] != "0" {
			t.Errorf("%s: GOOS=%s GOARCH=%s CGO_ENABLED=%s, want linux %s 0", name, settings["GOOS"], settings["GOARCH"], settings["CGO_ENABLED"], tc.arch)
		}
		if tc.arch == "amd64" {
			if got := reportedVersion(t, bin); got != version {
				t.Errorf("%s: idgen version reports %s, want %s", name, got, version)
			}
		} else if data, err := os.ReadFile(bin); err != nil || !bytes.Contains(data, []byte(version)) {
			t.Errorf("%s: %s not stamped in the binary (%v)", name, version, err)
		}
	}

	var pkg struct{ Name, Version string }
	npmTgz := filepath.Join(dist, "idgen-client-"+plain+".tgz")
	if err := json.Unmarshal(tarFile(t, npmTgz, "package/package.json"), &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Name != "@idgen/client" || pkg.Version != plain {
		t.Errorf("npm package: %s@%s, want @idgen/client@%s", pkg.Name, pkg.Version, plain)
	}
	tarFile(t, npmTgz, "package/dist/src/index.js") // built, not only the sources

	sdist := filepath.Join(dist, "idgen_client-"+py+".tar.gz")
	root := "idgen_client-" + py + "/"
	if got := metadataVersion(tarFile(t, sdist, root+"PKG-INFO")); got != py {
		t.Errorf("sdist PKG-INFO: Version %q, want %s", got, py)
	}
	if pyproject := tarFile(t, sdist, root+"pyproject.toml"); !bytes.Contains(pyproject, []byte(`version = "`+py+`"`)) {
		t.Errorf("sdist pyproject.toml has no version = %q", py)
	}

	wheel := filepath.Join(dist, "idgen_client-"+py+"-py3-none-any.whl")
	z, err := zip.OpenReader(wheel)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	files := map[string][]byte{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name], err = io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	info := "idgen_client-" + py + ".dist-info/"
	if got := metadataVersion(files[info+"METADATA"]); got != py {
		t.Errorf("wheel METADATA: Version %q, want %s", got, py)
	}
	if !bytes.Contains(files["idgen_client/__init__.py"], []byte(`__version__ = "`+py+`"`)) {
		t.Errorf("wheel idgen_client/__init__.py has no __version__ = %q", py)
	}
	if !bytes.Contains(files[info+"RECORD"], []byte("idgen_client/client.py,sha256=")) {
		t.Errorf("wheel RECORD lists no idgen_client/client.py:\n%s", files[info+"RECORD"])
	}

	notes, err := os.ReadFile(filepath.Join(dist, "RELEASE_NOTES.md"))
	if err != nil || !bytes.HasPrefix(notes, []byte("## [")) || !bytes.Contains(notes, []byte("### Added")) {
		t.Errorf("RELEASE_NOTES.md: %.60q (%v), want a CHANGELOG section", notes, err)
	}

	sums, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		data, err := os.ReadFile(filepath.Join(dist, name))
		if !ok || err != nil {
			t.Errorf("SHA256SUMS line %q: %v", sc.Text(), err)
			continue
		}
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS: %s has another hash", name)
		}
		listed[name] = true
	}
	for _, name := range []string{
		"idgen-" + version + "-linux-amd64.tar.gz", "idgen-" + version + "-linux-arm64.tar.gz",
		filepath.Base(npmTgz), filepath.Base(sdist), filepath.Base(wheel), "RELEASE_NOTES.md",
	} {
		if !listed[name] {
			t.Errorf("SHA256SUMS does not list %s", name)
		}
	}
}

// copyDist copies the files of dist into a new directory, renaming the
// version from in their names to out.
func copyDist(t *testing.T, dist, from, to string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dist, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := strings.ReplaceAll(e.Name(), from, to)
		if e.Name() == "SHA256SUMS" {
			data = bytes.ReplaceAll(data, []byte(from), []byte(to))
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkVerify: scripts/release.sh verify passes the release's artifacts
// and fails, naming the artifact, on each that is wrong.
func checkVerify(t *testing.T, dist, version string) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if out, code := release(t, root, []string{"VERSION=" + version}, "verify", dist); code != 0 {
		t.Fatalf("verify of the release: exit %d, want 0\n%s", code, out)
	}
	plain := strings.TrimPrefix(version, "v")

	for _, tc := range []struct {
		name   string
		broken func(t *testing.T) (dir, version string)
		want   string
	}{
		{"binaries stamped with another version", func(t *testing.T) (string, string) {
			// Every artifact renamed as if of v7.7.7: the binary still says version.
			dir := copyDist(t, dist, plain, "7.7.7")
			rewriteTar(t, filepath.Join(dir, "idgen-v7.7.7-linux-amd64.tar.gz"), func(h *tar.Header, body []byte) []byte {
				h.Name = strings.ReplaceAll(h.Name, plain, "7.7.7")
				return body
			})
			return dir, "v7.7.7"
		}, `idgen version says "idgen ` + version},
		{"amd64 archive holding the arm64 binary", func(t *testing.T) (string, string) {
			dir := copyDist(t, dist, "", "")
			arm := "idgen-" + version + "-linux-arm64"
			amd := "idgen-" + version + "-linux-amd64"
			rewriteTar(t, filepath.Join(dir, amd+".tar.gz"), replaceMember(amd+"/idgen", tarFile(t, filepath.Join(dist, arm+".tar.gz"), arm+"/idgen")))
			return dir, version
		}, "ELF machine 183, want 62"},
		{"npm package of another version", func(t *testing.T) (string, string) {
			dir := copyDist(t, dist, "", "")
			npm := filepath.Join(dir, "idgen-client-"+plain+".tgz")
			pkg := tarFile(t, npm, "package/package.json")
			rewriteTar(t, npm, replaceMember("package/package.json", bytes.Replace(pkg, []byte(`"version": "`+plain+`"`), []byte(`"version": "0.0.1"`), 1)))
			return dir, version
		}, `package.json version "0.0.1"`},
		{"wheel of another version", func(t *testing.T) (string, string) {
			dir := copyDist(t, dist, "", "")
			py := pyVersion(version)
			rewriteZip(t, filepath.Join(dir, "idgen_client-"+py+"-py3-none-any.whl"), "idgen_client-"+py+".dist-info/METADATA",
				func(b []byte) []byte { return bytes.Replace(b, []byte("Version: "+py), []byte("Version: 0.0.1"), 1) })
			return dir, version
		}, `version "0.0.1`},
		{"a file changed after SHA256SUMS", func(t *testing.T) (string, string) {
			dir := copyDist(t, dist, "", "")
			notes := filepath.Join(dir, "RELEASE_NOTES.md")
			data, err := os.ReadFile(notes)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(notes, append(data, "\nchanged\n"...), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir, version
		}, "SHA256SUMS does not match"},
		{"a missing artifact", func(t *testing.T) (string, string) {
			dir := copyDist(t, dist, "", "")
			if err := os.Remove(filepath.Join(dir, "idgen_client-"+pyVersion(version)+".tar.gz")); err != nil {
				t.Fatal(err)
			}
			return dir, version
		}, ".tar.gz is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, v := tc.broken(t)
			out, code := release(t, root, []string{"VERSION=" + v}, "verify", dir)
			if code == 0 || !strings.Contains(out, tc.want) {
				t.Errorf("verify: exit %d, output\n%s\nwant a failure saying %q", code, out, tc.want)
			}
		})
	}
}

// rewriteTar rewrites each member of the gzipped tar path with edit,
// which may change the header and returns the new contents.
func rewriteTar(t *testing.T, path string, edit func(h *tar.Header, body []byte) []byte) {
	t.Helper()
	in, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	gw := gzip.NewWriter(&out)
	tw := tar.NewWriter(gw)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		body = edit(h, body)
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceMember is an edit for rewriteTar that replaces member name with data.
func replaceMember(name string, data []byte) func(*tar.Header, []byte) []byte {
	return func(h *tar.Header, body []byte) []byte {
		if h.Name == name {
			return data
		}
		return body
	}
}

// rewriteZip replaces the member name of the zip path with edit(member).
func rewriteZip(t *testing.T, path, name string, edit func([]byte) []byte) {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == name {
			body = edit(body)
		}
		w, err := zw.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	z.Close()
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseRefuses: what must not be released is refused before
// anything is built or tagged, with exit code 2 and a message saying why.
func TestReleaseRefuses(t *testing.T) {
	dir := repoCopy(t, "v0.8.7")
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir string)
		env     []string
		want    string
	}{
		{"no v", nil, []string{"VERSION=0.9.0"}, "is not vMAJOR.MINOR.PATCH"},
		{"two numbers", nil, []string{"VERSION=v0.9"}, "is not vMAJOR.MINOR.PATCH"},
		{"leading zero", nil, []string{"VERSION=v0.09.0"}, "is not vMAJOR.MINOR.PATCH"},
		{"pre-release", nil, []string{"VERSION=v0.9.0-rc.1"}, "is not vMAJOR.MINOR.PATCH"},
		{"git describe (make's default)", nil, []string{"VERSION=v0.8.7-3-gabcdef0"}, "is not vMAJOR.MINOR.PATCH"},
		{"dryrun version in a release", nil, []string{"VERSION=v0.0.0-dryrun", "DRY_RUN=0"}, "for DRY_RUN=1 only"},
		{"existing tag", nil, []string{"VERSION=v0.8.7", "DRY_RUN=1"}, "tag v0.8.7 exists already"},
		{"no CHANGELOG section", nil, []string{"VERSION=v0.9.0", "DRY_RUN=0"}, `no "## [0.9.0] - YYYY-MM-DD" section`},
		{"CHANGELOG heading with no date", func(t *testing.T, dir string) {
			editFile(t, dir, "CHANGELOG.md", `(?m)^## \[Unreleased\]\n`, "## [Unreleased]\n\n## [0.9.0]\n")
			git(t, dir, "commit", "-q", "-am", "no date")
		}, []string{"VERSION=v0.9.0", "DRY_RUN=0"}, `the heading must be "## [0.9.0] - YYYY-MM-DD"`},
		{"manifests of another version", func(t *testing.T, dir string) {
			editFile(t, dir, "CHANGELOG.md", `(?m)^## \[Unreleased\]\n`, "## [Unreleased]\n\n## [0.9.0] - 2026-11-27\n")
			editFile(t, dir, "clients/python/pyproject.toml", `(?m)^version = "[^"]*"`, `version = "0.9.0"`)
			git(t, dir, "commit", "-q", "-am", "only pyproject")
		}, []string{"VERSION=v0.9.0", "DRY_RUN=0"}, "clients/typescript/package.json says 0.1.0, want 0.9.0"},
		{"uncommitted change", func(t *testing.T, dir string) {
			editFile(t, dir, "README.md", `idgen`, "idgen (edited)")
		}, []string{"VERSION=v0.9.0", "DRY_RUN=0"}, "uncommitted changes to tracked files"},
		{"DRY_RUN neither 0 nor 1", nil, []string{"VERSION=v0.9.0", "DRY_RUN=yes"}, "DRY_RUN=yes: want 0 or 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			git(t, dir, "reset", "-q", "--hard", "v0.8.7")
			if tc.prepare != nil {
				tc.prepare(t, dir)
			}
			dist := filepath.Join(t.TempDir(), "dist")
			out, code := release(t, dir, append(tc.env, "RELEASE_IMAGE=0", "DIST="+dist))
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output\n%s\nwant exit 2 saying %q", code, out, tc.want)
			}
			if _, err := os.Stat(dist); !os.IsNotExist(err) {
				t.Errorf("dist %s exists after a refusal (%v), want nothing built", dist, err)
			}
			if tags := git(t, dir, "tag", "-l"); tags != "v0.8.7" {
				t.Errorf("tags after a refusal: %q, want only v0.8.7", tags)
			}
		})
	}
}
