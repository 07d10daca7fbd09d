// Package deploy_test checks the deployment files without running them: the
// Dockerfile, docker-compose.yml (with its nginx configurations) and the
// Kubernetes manifests must agree with each other and with the idgen binary
// (its flags, environment variables, default port and metrics).
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/teststore"
)

// ---- Dockerfile -----------------------------------------------------------

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, USER, …
	args string
	line int
}

// stage is one FROM … section of a Dockerfile.
type stage struct {
	from  string // the FROM arguments
	insts []instruction
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		stages []stage
		cur    strings.Builder
		start  int
	)
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			stages = append(stages, stage{from: in.args})
			return
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
			}
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
		if strings.Contains(hc.args, "wget") && !strings.HasPrefix(final.from, "alpine") && !strings.Contains(final.from, "busybox") {
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

// ---- docker-compose.yml ---------------------------------------------------

type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	// Extensions holds the top-level x-… fields (YAML anchors shared by
	// services); any other unknown key is reported.
	Extensions map[string]any `yaml:",inline"`
}

// composeService lists the keys idgen's compose file uses; the decoder
// refuses others, so that a misspelt key fails the test instead of being
// ignored by it.
type composeService struct {
	Image       string                       `yaml:"image"`
	Build       any                          `yaml:"build"`
	Command     []string                     `yaml:"command"`
	Profiles    []string                     `yaml:"profiles"`
	Restart     string                       `yaml:"restart"`
	Hostname    string                       `yaml:"hostname"`
	Environment map[string]string            `yaml:"environment"`
	Healthcheck *composeHealth               `yaml:"healthcheck"`
	DependsOn   map[string]composeDependency `yaml:"depends_on"`
	Ports       []string                     `yaml:"ports"`
	Volumes     []string                     `yaml:"volumes"`
	StopGrace   string                       `yaml:"stop_grace_period"`
}

type composeHealth struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	StartPeriod string   `yaml:"start_period"`
	Retries     int      `yaml:"retries"`
	Disable     bool     `yaml:"disable"`
}

type composeDependency struct {
	Condition string `yaml:"condition"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt key (healthchek) is an error
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for k := range f.Extensions {
		if !strings.HasPrefix(k, "x-") {
			t.Errorf("docker-compose.yml: unknown top-level key %q", k)
		}
	}
	if len(f.Services) == 0 {
		t.Fatal("docker-compose.yml: no services")
	}
	return f
}

// idgenNode reports whether a compose service runs idgen serve.
func (s composeService) idgenNode() bool {
	return len(s.Command) > 0 && s.Command[0] == "serve"
}

// oneShot reports whether s runs to completion: every service that depends
// on it waits for service_completed_successfully, and at least one does.
func oneShot(f composeFile, name string) bool {
	dependents := 0
	for _, s := range f.Services {
		if d, ok := s.DependsOn[name]; ok {
			if d.Condition != "service_completed_successfully" {
				return false
			}
			dependents++
		}
	}
	return dependents > 0 && f.Services[name].Restart == "no"
}

// urlPort returns the port of the http:// URL in a healthcheck test.
func urlPort(test []string) (path, port string, ok bool) {
	for _, a := range test {
		for _, f := range strings.Fields(a) {
			u, err := url.Parse(strings.Trim(f, `"'`))
			if err == nil && u.Scheme == "http" {
				p := u.Port()
				if p == "" {
					p = "80"
				}
				return u.Path, p, true
			}
		}
	}
	return "", "", false
}

func TestCompose(t *testing.T) {
	f := loadCompose(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range f.Services {
			if !yield(n) {
				return
			}
		}
	})

	t.Run("healthchecks", func(t *testing.T) {
		for _, name := range names {
			s := f.Services[name]
			switch {
			case s.Healthcheck == nil:
				t.Errorf("service %s has no healthcheck", name)
			case s.Healthcheck.Disable:
				// Only a job that runs to completion may turn it off (the
				// image's own HEALTHCHECK would probe a server it never starts).
				if !oneShot(f, name) {
					t.Errorf("service %s disables its healthcheck but is not a one-shot job (restart: \"no\", waited for with service_completed_successfully)", name)
				}
			case len(s.Healthcheck.Test) < 2 || (s.Healthcheck.Test[0] != "CMD" && s.Healthcheck.Test[0] != "CMD-SHELL"):
				t.Errorf("service %s: healthcheck test %q: want [\"CMD\", …] or [\"CMD-SHELL\", …]", name, s.Healthcheck.Test)
			}
		}
	})

	t.Run("dependencies", func(t *testing.T) {
		for _, name := range names {
			s := f.Services[name]
			for dep, d := range s.DependsOn {
				target, ok := f.Services[dep]
				if !ok {
					t.Errorf("service %s depends on %s, which does not exist", name, dep)
					continue
				}
				switch d.Condition {
				case "service_healthy":
					if target.Healthcheck == nil || target.Healthcheck.Disable {
						t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
					}
				case "service_completed_successfully":
				default:
					t.Errorf("service %s depends on %s with condition %q: want service_healthy or service_completed_successfully", name, dep, d.Condition)
				}
				// A service outside any profile must not need one that only
				// a profile starts; a profiled one only its own profile's.
				if len(target.Profiles) > 0 && !slices.ContainsFunc(s.Profiles, func(p string) bool { return slices.Contains(target.Profiles, p) }) {
					t.Errorf("service %s (profiles %v) depends on %s, started only by profiles %v", name, s.Profiles, dep, target.Profiles)
				}
			}
		}
	})

	t.Run("images pinned", func(t *testing.T) {
		for _, name := range names {
			img := f.Services[name].Image
			if img == "" {
				t.Errorf("service %s has no image", name)
				continue
			}
			if _, tag, ok := strings.Cut(img, ":"); !ok || tag == "latest" {
				t.Errorf("service %s: image %q: want a pinned tag, not latest", name, img)
			}
		}
	})

	t.Run("idgen nodes", func(t *testing.T) {
		nodes := 0
		stacks := map[string]string{} // DSN → datacenter
		for _, name := range names {
			s := f.Services[name]
			if !s.idgenNode() {
				continue
			}
			nodes++
			env := s.Environment
			_, port, err := net.SplitHostPort(env["IDGEN_LISTEN"])
			if err != nil || !strings.HasPrefix(env["IDGEN_LISTEN"], "0.0.0.0:") {
				t.Errorf("%s: IDGEN_LISTEN=%q: want 0.0.0.0:PORT", name, env["IDGEN_LISTEN"])
			}
			if s.Healthcheck != nil {
				if path, hport, ok := urlPort(s.Healthcheck.Test); !ok || hport != port || (path != "/readyz" && path != "/healthz") {
					t.Errorf("%s: healthcheck %q: want /readyz or /healthz on port %s", name, s.Healthcheck.Test, port)
				}
			}
			if env["IDGEN_MIGRATE"] != "false" {
				t.Errorf("%s: IDGEN_MIGRATE=%q: nodes must not race to migrate; want \"false\"", name, env["IDGEN_MIGRATE"])
			}
			// The node waits for a migrate job on the same database.
			migrated := false
			for dep, d := range s.DependsOn {
				ds := f.Services[dep]
				if d.Condition == "service_completed_successfully" && slices.Equal(ds.Command, []string{"migrate", "up"}) &&
					ds.Environment["IDGEN_DSN"] == env["IDGEN_DSN"] {
					migrated = true
				}
			}
			if !migrated {
				t.Errorf("%s: does not wait for a `migrate up` job on its database %s", name, env["IDGEN_DSN"])
			}
			if dc, ok := stacks[env["IDGEN_DSN"]]; ok && dc != env["IDGEN_DATACENTER"] {
				t.Errorf("%s: datacenter %s differs from another node on the same database (%s)", name, env["IDGEN_DATACENTER"], dc)
			}
			stacks[env["IDGEN_DSN"]] = env["IDGEN_DATACENTER"]
			if d, err := time.ParseDuration(s.StopGrace); err != nil || d < 35*time.Second {
				t.Errorf("%s: stop_grace_period %q: want at least 35s to release the lease", name, s.StopGrace)
			}
		}
		if nodes < 3 {
			t.Errorf("got %d idgen nodes, want at least 3", nodes)
		}
		// Two databases are two separate lease tables: their nodes must not
		// share a datacenter ID, or their Snowflake IDs could collide.
		seen := map[string]string{}
		for dsn, dc := range stacks {
			if other, ok := seen[dc]; ok {
				t.Errorf("datacenter %s used on two databases: %s and %s", dc, other, dsn)
			}
			seen[dc] = dsn
		}
	})

	t.Run("load balancers", func(t *testing.T) {
		published := map[string]string{}
		for _, name := range names {
			s := f.Services[name]
			if !strings.HasPrefix(s.Image, "nginx:") {
				continue
			}
			var conf string
			for _, v := range s.Volumes {
				if src, dst, _ := strings.Cut(v, ":"); strings.HasPrefix(dst, "/etc/nginx/") {
					conf = filepath.Join("..", src)
				}
			}
			if conf == "" {
				t.Errorf("%s: mounts no nginx configuration", name)
				continue
			}
			upstreams := nginxUpstreams(t, conf)
			// The balancer fronts exactly the idgen nodes it depends on,
			// on their listen port.
			var want []string
			for dep := range s.DependsOn {
				if d := f.Services[dep]; d.idgenNode() {
					_, port, _ := net.SplitHostPort(d.Environment["IDGEN_LISTEN"])
					want = append(want, dep+":"+port)
				}
			}
			sort.Strings(want)
			if !slices.Equal(upstreams, want) {
				t.Errorf("%s: %s lists upstream servers %v, want the nodes it depends on %v", name, conf, upstreams, want)
			}
			for _, p := range s.Ports {
				host, _, _ := strings.Cut(p, ":")
				published[host] = name
			}
		}
		if lb, ok := published["8080"]; !ok || len(f.Services[lb].Profiles) != 0 {
			t.Errorf("port 8080 published by %q (profiles %v): want a balancer that `docker compose up` starts without a profile", lb, f.Services[lb].Profiles)
		}
	})
}

// nginxUpstreams returns the host:port of every server line in the upstream
// blocks of an nginx configuration, sorted.
func nginxUpstreams(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "upstream "):
			in = true
		case in && line == "}":
			in = false
		case in && strings.HasPrefix(line, "server "):
			out = append(out, strings.Fields(strings.TrimSuffix(line, ";"))[1])
		}
	}
	sort.Strings(out)
	return out
}

// ---- Kubernetes -----------------------------------------------------------

type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	file string
	node yaml.Node
}

type podSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	EnvFrom []struct {
		SecretRef struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	StartupProbe   *probe `yaml:"startupProbe"`
	Lifecycle      struct {
		PreStop struct {
			Exec struct {
				Command []string `yaml:"command"`
			} `yaml:"exec"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	SecurityContext struct {
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		RunAsUser                *int  `yaml:"runAsUser"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"` // a name or a number
	} `yaml:"httpGet"`
}

func (c container) env(name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// portNumber resolves a probe's or Service's port, a name or a number.
func (c container) portNumber(n yaml.Node) (int, bool) {
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p, true
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func loadManifests(t *testing.T) map[string][]k8sObject {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/k8s: %v", err)
	}
	byKind := map[string][]k8sObject{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var o k8sObject
			if err := n.Decode(&o); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if o.Kind == "" || o.APIVersion == "" {
				t.Fatalf("%s: a document without kind or apiVersion", file)
			}
			o.file, o.node = filepath.Base(file), n
			byKind[o.Kind] = append(byKind[o.Kind], o)
		}
	}
	return byKind
}

// one returns the only object of kind, decoding its spec into spec.
func one(t *testing.T, objs map[string][]k8sObject, kind string, spec any) k8sObject {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("got %d %s objects, want 1", len(objs[kind]), kind)
	}
	o := objs[kind][0]
	var doc struct {
		Spec yaml.Node `yaml:"spec"`
	}
	if err := o.node.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if spec != nil {
		if err := doc.Spec.Decode(spec); err != nil {
			t.Fatalf("%s %s: spec: %v", kind, o.Metadata.Name, err)
		}
	}
	return o
}

func TestKubernetes(t *testing.T) {
	objs := loadManifests(t)
	stages := parseDockerfile(t, "Dockerfile")
	imagePort := stages[len(stages)-1].envValue("IDGEN_LISTEN")
	_, imagePort, _ = net.SplitHostPort(imagePort)

	var dep struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	}
	one(t, objs, "Deployment", &dep)
	pod := dep.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	t.Run("selector", func(t *testing.T) {
		for k, v := range dep.Selector.MatchLabels {
			if dep.Template.Metadata.Labels[k] != v {
				t.Errorf("selector %s=%s does not match the pod labels %v", k, v, dep.Template.Metadata.Labels)
			}
		}
		if dep.Replicas < 2 {
			t.Errorf("got %d replicas, want at least 2", dep.Replicas)
		}
	})

	t.Run("ports and probes", func(t *testing.T) {
		host, listenPort, err := net.SplitHostPort(c.env("IDGEN_LISTEN"))
		if err != nil || host != "0.0.0.0" {
			t.Fatalf("IDGEN_LISTEN=%q: want 0.0.0.0:PORT", c.env("IDGEN_LISTEN"))
		}
		if listenPort != imagePort {
			t.Errorf("IDGEN_LISTEN port %s differs from the image's %s", listenPort, imagePort)
		}
		want, _ := strconv.Atoi(listenPort)
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != want {
			t.Errorf("container ports %+v: want one containerPort %d", c.Ports, want)
		}
		for _, tc := range []struct {
			name string
			p    *probe
			path string
		}{
			{"readinessProbe", c.ReadinessProbe, "/readyz"},
			{"livenessProbe", c.LivenessProbe, "/healthz"},
			{"startupProbe", c.StartupProbe, "/healthz"},
		} {
			if tc.p == nil || tc.p.HTTPGet == nil {
				t.Errorf("%s: missing or not httpGet", tc.name)
				continue
			}
			if tc.p.HTTPGet.Path != tc.path {
				t.Errorf("%s: got path %s, want %s", tc.name, tc.p.HTTPGet.Path, tc.path)
			}
			if port, ok := c.portNumber(tc.p.HTTPGet.Port); !ok || port != want {
				t.Errorf("%s: port %q is %d, want %d (the port idgen listens on)", tc.name, tc.p.HTTPGet.Port.Value, port, want)
			}
		}
	})

	t.Run("non-root", func(t *testing.T) {
		for _, sc := range []struct {
			where string
			ok    *bool
			uid   *int
		}{
			{"pod", pod.SecurityContext.RunAsNonRoot, pod.SecurityContext.RunAsUser},
			{"container", c.SecurityContext.RunAsNonRoot, c.SecurityContext.RunAsUser},
		} {
			if sc.ok == nil || !*sc.ok {
				t.Errorf("%s securityContext: runAsNonRoot is not true", sc.where)
			}
			if sc.uid == nil || *sc.uid != dockerfileUID {
				t.Errorf("%s securityContext: runAsUser %v, want %d (the image's USER)", sc.where, sc.uid, dockerfileUID)
			}
		}
		if p := c.SecurityContext.AllowPrivilegeEscalation; p == nil || *p {
			t.Error("allowPrivilegeEscalation is not false")
		}
		if r := c.SecurityContext.ReadOnlyRootFilesystem; r == nil || !*r {
			t.Error("readOnlyRootFilesystem is not true")
		}
	})

	t.Run("graceful shutdown", func(t *testing.T) {
		// preStop sleep, then three shutdown steps (HTTP, segment tails,
		// lease release) of at most IDGEN_SHUTDOWN_TIMEOUT each.
		cmd := c.Lifecycle.PreStop.Exec.Command
		if len(cmd) != 2 || cmd[0] != "sleep" {
			t.Fatalf("preStop %q: want [sleep N]", cmd)
		}
		sleep, err := strconv.Atoi(cmd[1])
		if err != nil || sleep < 1 {
			t.Fatalf("preStop sleep %q: want whole seconds", cmd[1])
		}
		step, err := time.ParseDuration(c.env("IDGEN_SHUTDOWN_TIMEOUT"))
		if err != nil {
			t.Fatalf("IDGEN_SHUTDOWN_TIMEOUT=%q: %v", c.env("IDGEN_SHUTDOWN_TIMEOUT"), err)
		}
		need := time.Duration(sleep)*time.Second + 3*step
		if pod.TerminationGracePeriodSeconds == nil {
			t.Fatal("terminationGracePeriodSeconds not set (the default 30 s is too short)")
		}
		if got := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; got <= need {
			t.Errorf("terminationGracePeriodSeconds %v, want more than preStop %ds + 3 x %v = %v", got, sleep, step, need)
		}
		ttl, err := time.ParseDuration(c.env("IDGEN_LEASE_TTL"))
		hb, err2 := time.ParseDuration(c.env("IDGEN_HEARTBEAT"))
		if err != nil || err2 != nil || hb > ttl/2 {
			t.Errorf("IDGEN_LEASE_TTL=%q IDGEN_HEARTBEAT=%q: want durations with heartbeat at most ttl/2",
				c.env("IDGEN_LEASE_TTL"), c.env("IDGEN_HEARTBEAT"))
		}
	})

	t.Run("secret", func(t *testing.T) {
		secret := one(t, objs, "Secret", nil)
		var s struct {
			StringData map[string]string `yaml:"stringData"`
		}
		if err := secret.node.Decode(&s); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"IDGEN_DSN", "IDGEN_ADMIN_TOKEN"} {
			if _, ok := s.StringData[k]; !ok {
				t.Errorf("Secret %s has no %s", secret.Metadata.Name, k)
			}
			if c.env(k) != "" {
				t.Errorf("%s is set in plain text in the Deployment; it belongs in the Secret", k)
			}
		}
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != secret.Metadata.Name {
			t.Errorf("container envFrom %+v: want secretRef %s", c.EnvFrom, secret.Metadata.Name)
		}
		if c.env("IDGEN_MIGRATE") != "false" {
			t.Errorf("IDGEN_MIGRATE=%q: pods must leave migrations to the Job", c.env("IDGEN_MIGRATE"))
		}
	})

	t.Run("migrate job", func(t *testing.T) {
		var job struct {
			Template struct {
				Spec podSpec `yaml:"spec"`
			} `yaml:"template"`
		}
		one(t, objs, "Job", &job)
		jc := job.Template.Spec.Containers
		if len(jc) != 1 || !slices.Equal(jc[0].Args, []string{"migrate", "up"}) || jc[0].Image != c.Image {
			t.Fatalf("Job containers %+v: want one running `migrate up` with image %s", jc, c.Image)
		}
		if r := job.Template.Spec.SecurityContext.RunAsNonRoot; r == nil || !*r {
			t.Error("Job: runAsNonRoot is not true")
		}
	})

	t.Run("service and monitoring", func(t *testing.T) {
		var svc struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name       string    `yaml:"name"`
				Port       int       `yaml:"port"`
				TargetPort yaml.Node `yaml:"targetPort"`
			} `yaml:"ports"`
		}
		service := one(t, objs, "Service", &svc)
		for k, v := range svc.Selector {
			if dep.Template.Metadata.Labels[k] != v {
				t.Errorf("Service selector %s=%s does not select the pods", k, v)
			}
		}
		portNames := map[string]bool{}
		for _, p := range svc.Ports {
			if n, ok := c.portNumber(p.TargetPort); !ok || n != c.Ports[0].ContainerPort {
				t.Errorf("Service port %s: targetPort %q is not the container's port", p.Name, p.TargetPort.Value)
			}
			portNames[p.Name] = true
		}

		var sm struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Endpoints []struct {
				Port string `yaml:"port"`
				Path string `yaml:"path"`
			} `yaml:"endpoints"`
		}
		one(t, objs, "ServiceMonitor", &sm)
		for k, v := range sm.Selector.MatchLabels {
			if service.Metadata.Labels[k] != v {
				t.Errorf("ServiceMonitor selector %s=%s does not select the Service (labels %v)", k, v, service.Metadata.Labels)
			}
		}
		if len(sm.Endpoints) != 1 || !portNames[sm.Endpoints[0].Port] || sm.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v: want /metrics on a named port of the Service %v", sm.Endpoints, portNames)
		}

		var pdb struct {
			MaxUnavailable *int `yaml:"maxUnavailable"`
			MinAvailable   *int `yaml:"minAvailable"`
			Selector       struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		}
		one(t, objs, "PodDisruptionBudget", &pdb)
		for k, v := range pdb.Selector.MatchLabels {
			if dep.Template.Metadata.Labels[k] != v {
				t.Errorf("PodDisruptionBudget selector %s=%s does not select the pods", k, v)
			}
		}
		switch {
		case pdb.MaxUnavailable != nil && (*pdb.MaxUnavailable < 1 || *pdb.MaxUnavailable >= dep.Replicas):
			t.Errorf("PodDisruptionBudget maxUnavailable %d with %d replicas", *pdb.MaxUnavailable, dep.Replicas)
		case pdb.MinAvailable != nil && (*pdb.MinAvailable < 1 || *pdb.MinAvailable >= dep.Replicas):
			t.Errorf("PodDisruptionBudget minAvailable %d with %d replicas", *pdb.MinAvailable, dep.Replicas)
		case pdb.MaxUnavailable == nil && pdb.MinAvailable == nil:
			t.Error("PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
		}
	})

	t.Run("kustomization", func(t *testing.T) {
		data, err := os.ReadFile("k8s/kustomization.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var k struct {
			Resources []string `yaml:"resources"`
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob("k8s/*.yaml")
		var want []string
		for _, f := range files {
			if b := filepath.Base(f); b != "kustomization.yaml" {
				want = append(want, b)
			}
		}
		got := slices.Sorted(slices.Values(k.Resources))
		if !slices.Equal(got, want) {
			t.Errorf("kustomization resources %v, want every manifest %v", got, want)
		}
	})
}

// ---- agreement with the binary ---------------------------------------------

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// idgenBinary builds cmd/idgen once per test process.
func idgenBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idgen-deploy-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "idgen")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/idgen").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/idgen: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// usage returns the --help text of an idgen subcommand.
func usage(t *testing.T, sub string) string {
	t.Helper()
	out, err := exec.Command(idgenBinary(t), sub, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("idgen %s --help: %v\n%s", sub, err, out)
	}
	return string(out)
}

// TestEnvironmentKnownToBinary checks every IDGEN_ variable the deployment
// files set against the variables `idgen serve --help` and `idgen migrate
// --help` document, and the port of the binary's default --listen against
// the port the deployment files use.
func TestEnvironmentKnownToBinary(t *testing.T) {
	serve := usage(t, "serve")
	migrate := usage(t, "migrate")

	m := regexp.MustCompile(`--listen ADDR .*\(default ([0-9.]+:[0-9]+)\)`).FindStringSubmatch(serve)
	if m == nil {
		t.Fatalf("idgen serve --help does not show the default --listen:\n%s", serve)
	}
	_, defPort, _ := net.SplitHostPort(m[1])
	stages := parseDockerfile(t, "Dockerfile")
	_, imagePort, _ := net.SplitHostPort(stages[len(stages)-1].envValue("IDGEN_LISTEN"))
	if defPort != imagePort {
		t.Errorf("the binary listens on port %s by default, the image on %s", defPort, imagePort)
	}

	envRE := regexp.MustCompile(`\bIDGEN_[A-Z_]+\b`)
	for _, file := range []string{"Dockerfile", "../docker-compose.yml", "k8s/deployment.yaml", "k8s/secret.yaml", "k8s/migrate-job.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(envRE.FindAllString(string(data), -1)))) {
			if !strings.Contains(serve, "["+name+"]") && !strings.Contains(migrate, "["+name+"]") {
				t.Errorf("%s uses %s, which neither idgen serve nor idgen migrate reads", file, name)
			}
		}
	}
}

// TestMetricsExist checks that every idgen_ metric the alert rules and
// docs/operations.md name is exported by a real server.
func TestMetricsExist(t *testing.T) {
	families := scrapeMetrics(t)
	metricRE := regexp.MustCompile(`\bidgen_[a-z_]+\b`)
	for _, file := range []string{"k8s/prometheusrule.yaml", "../docs/operations.md"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := slices.Compact(slices.Sorted(slices.Values(metricRE.FindAllString(string(data), -1))))
		if len(names) == 0 {
			t.Errorf("%s names no idgen_ metric", file)
		}
		for _, name := range names {
			base := name
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suf); ok && families[b] {
					base = b
				}
			}
			if !families[base] {
				t.Errorf("%s names %s, which the server does not export", file, name)
			}
		}
	}
}

// scrapeMetrics starts an idgen server on SQLite, serves a Snowflake and a
// namespace request (so that labelled series exist) and returns the metric
// families /metrics lists.
func scrapeMetrics(t *testing.T) map[string]bool {
	t.Helper()
	ctx := context.Background()
	store := teststore.Open(t, "sqlite")
	keeper, err := allocator.NewKeeper(store, allocator.KeeperSettings{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := keeper.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keeper.Close(ctx) })
	segs := allocator.NewSegments(store, allocator.SegmentSettings{Fallback: keeper})
	t.Cleanup(func() { _ = segs.Close(ctx) })
	if _, err := store.CreateNamespace(ctx, allocator.Namespace{Name: "orders", Step: 100, MinStep: 100, MaxStep: 1000,
		Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone}); err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Config{Keeper: keeper, Segments: segs, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	waitReady(t, keeper)

	for _, path := range []string{"/ids?count=2", "/ids?count=2&namespace=orders"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: got status %d, want 200", path, resp.StatusCode)
		}
	}
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	families := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = true
		}
	}
	if len(families) == 0 {
		t.Fatal("/metrics lists no metric family")
	}
	return families
}

// waitReady waits, bounded, for the keeper to hold its lease.
func waitReady(t *testing.T, k *allocator.Keeper) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for k.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("keeper not ready after 10s: %v", k.Ready())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
