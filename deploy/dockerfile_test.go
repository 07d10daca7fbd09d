package deploy_test

// The Dockerfile: a static multi-stage build whose final stage runs idgen as
// a numeric non-root user, listening on every interface, with a HEALTHCHECK.

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, USER, …
	args string
	line int
}

// stage is one FROM … section of a Dockerfile.
type stage struct {
	from    string // the FROM arguments, with the default values of the build arguments
	fromRaw string // the FROM arguments as written
	insts   []instruction
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		stages  []stage
		cur     strings.Builder
		start   int
		globals = map[string]string{} // the build arguments declared before the first FROM
	)
	expand := func(s string) string {
		return os.Expand(s, func(name string) string {
			if v, ok := globals[name]; ok {
				return v
			}
			return "$" + name
		})
	}
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			stages = append(stages, stage{from: expand(in.args), fromRaw: in.args})
			return
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
			}
			name, value, _ := strings.Cut(in.args, "=")
			globals[name] = strings.Trim(value, `"`)
			return
		}
		stages[len(stages)-1].insts = append(stages[len(stages)-1].insts, in)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	if len(stages) == 0 {
		t.Fatalf("%s: no FROM", path)
	}
	return stages
}

// last returns the last instruction cmd of s, or false.
func (s stage) last(cmd string) (instruction, bool) {
	for i := len(s.insts) - 1; i >= 0; i-- {
		if s.insts[i].cmd == cmd {
			return s.insts[i], true
		}
	}
	return instruction{}, false
}

// envValue returns the value an ENV instruction of s sets for name.
func (s stage) envValue(name string) string {
	v := ""
	for _, in := range s.insts {
		if in.cmd != "ENV" {
			continue
		}
		for _, f := range strings.Fields(in.args) {
			if k, val, ok := strings.Cut(f, "="); ok && k == name {
				v = strings.Trim(val, `"`)
			}
		}
	}
	return v
}

const dockerfileUID = 10001 // the numeric user the image runs as

// stampedVersion is the version the tests' idgen binary is built with,
// through the Dockerfile's own -X flag (see versionVariable).
const stampedVersion = "v0.0.0-deploy-test"

// versionVariable returns the variable that the Dockerfile's go build sets
// to the VERSION build argument with -X, such as main.linkVersion.
func versionVariable(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-X[= ]([\w./-]+)=\$(?:VERSION\b|\{VERSION\})`).FindSubmatch(data)
	if m == nil {
		t.Fatal("Dockerfile: go build does not set a version variable with -X …=${VERSION}")
	}
	return string(m[1])
}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, "Dockerfile")
	if len(stages) < 2 {
		t.Fatalf("got %d stages, want a multi-stage build", len(stages))
	}
	final := stages[len(stages)-1]
	build := stages[:len(stages)-1]

	t.Run("static build", func(t *testing.T) {
		var builds []string
		for _, st := range build {
			for _, in := range st.insts {
				if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
					builds = append(builds, in.args)
				}
			}
		}
		if len(builds) != 1 {
			t.Fatalf("got %d RUN … go build in the build stages, want 1", len(builds))
		}
		if !regexp.MustCompile(`(^|\s)CGO_ENABLED=0(\s|$)`).MatchString(builds[0]) {
			t.Errorf("go build runs without CGO_ENABLED=0: %s", builds[0])
		}
		if !strings.Contains(builds[0], "./cmd/idgen") {
			t.Errorf("go build does not build ./cmd/idgen: %s", builds[0])
		}
	})

	t.Run("offline build", func(t *testing.T) {
		// A "# syntax=" directive makes BuildKit fetch its front end from a
		// registry; without one it uses the front end built into it.
		data, err := os.ReadFile("Dockerfile")
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`(?mi)^#\s*syntax\s*=.*`).Find(data); m != nil {
			t.Errorf("Dockerfile has the directive %q: an offline build would fail", m)
		}
		// Every base image is a build argument, so that CI can use local
		// stand-ins; the defaults are the official images.
		for i, st := range stages {
			image := strings.Fields(regexp.MustCompile(`--platform=\S+\s*`).ReplaceAllString(st.fromRaw, ""))[0]
			if !strings.HasPrefix(image, "${") {
				t.Errorf("stage %d: FROM %s: want the image from a build argument (FROM ${…_IMAGE})", i+1, st.fromRaw)
			}
		}
		if !strings.HasPrefix(build[0].from, "--platform=$BUILDPLATFORM golang:") || !strings.HasPrefix(final.from, "alpine:") {
			t.Errorf("default images %q and %q: want the official golang and alpine ones", build[0].from, final.from)
		}
		// The run stage installs nothing: any base image with a shell and
		// wget builds without a package repository.
		for _, in := range final.insts {
			if in.cmd == "RUN" && regexp.MustCompile(`\b(apk|apt-get|apt|yum|dnf)\b`).MatchString(in.args) {
				t.Errorf("line %d: the run stage installs packages (%s)", in.line, in.args)
			}
		}
	})

	t.Run("version", func(t *testing.T) {
		variable := versionVariable(t)
		declared := false
		for _, st := range build {
			for _, in := range st.insts {
				if in.cmd == "ARG" && (in.args == "VERSION" || strings.HasPrefix(in.args, "VERSION=")) {
					declared = true
				}
				if in.cmd == "RUN" && strings.Contains(in.args, "go build") && !declared {
					t.Errorf("go build uses ${VERSION} before ARG VERSION declares it in its stage")
				}
			}
		}
		// -X on a variable that does not exist is silently ignored: the
		// binary built with the Dockerfile's flag must report the version.
		out, err := exec.Command(idgenBinary(t), "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "idgen "+stampedVersion+" ") {
			t.Errorf("idgen version (built with -X %s=%s): got %q (%v), want idgen %s …", variable, stampedVersion, out, err, stampedVersion)
		}
	})

	t.Run("final stage", func(t *testing.T) {
		if strings.Contains(final.from, "golang") {
			t.Errorf("final stage FROM %s: want a small runtime image, not the Go toolchain", final.from)
		}
		copied := false
		for _, in := range final.insts {
			if in.cmd == "COPY" && strings.Contains(in.args, "--from=") && strings.Contains(in.args, "idgen") {
				copied = true
			}
		}
		if !copied {
			t.Error("final stage does not COPY --from the build stage the idgen binary")
		}
		user, ok := final.last("USER")
		if !ok {
			t.Fatal("final stage sets no USER: the container would run as root")
		}
		uid, _, _ := strings.Cut(user.args, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("USER %s: want a numeric non-root UID (Kubernetes' runAsNonRoot can check only numbers)", user.args)
		} else if n != dockerfileUID {
			t.Errorf("USER %s: got UID %d, want %d as the manifests expect", user.args, n, dockerfileUID)
		}
		// USER must not be followed by another stage-level switch back.
		hc, ok := final.last("HEALTHCHECK")
		if !ok || strings.HasPrefix(strings.ToUpper(hc.args), "NONE") {
			t.Fatal("final stage has no HEALTHCHECK")
		}
		if !strings.Contains(hc.args, "/healthz") {
			t.Errorf("HEALTHCHECK %q does not probe /healthz", hc.args)
		}
		// The probe needs a program in the image: BusyBox wget in Alpine.
		if strings.Contains(hc.args, "wget") && !strings.HasPrefix(final.from, "alpine:") && !strings.Contains(final.from, "busybox") {
			t.Errorf("HEALTHCHECK uses wget but the final image %s may not have it", final.from)
		}
		listen := final.envValue("IDGEN_LISTEN")
		host, port, err := net.SplitHostPort(listen)
		if err != nil || (host != "0.0.0.0" && host != "") {
			t.Fatalf("ENV IDGEN_LISTEN=%q: want 0.0.0.0:PORT, so that the container is reachable", listen)
		}
		expose, ok := final.last("EXPOSE")
		if !ok || strings.TrimSuffix(expose.args, "/tcp") != port {
			t.Errorf("EXPOSE %q, want the port of IDGEN_LISTEN %s", expose.args, port)
		}
		if !strings.Contains(hc.args, "${IDGEN_LISTEN##*:}") && !strings.Contains(hc.args, ":"+port+"/") {
			t.Errorf("HEALTHCHECK %q probes neither IDGEN_LISTEN's port nor %s", hc.args, port)
		}
		entry, _ := final.last("ENTRYPOINT")
		if !strings.Contains(entry.args, "idgen") {
			t.Errorf("ENTRYPOINT %q does not run idgen", entry.args)
		}
		if cmd, _ := final.last("CMD"); !strings.Contains(cmd.args, `"serve"`) {
			t.Errorf("CMD %q: want [\"serve\"]", cmd.args)
		}
	})
}
