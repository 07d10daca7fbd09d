package deploy_test

// docker-compose.yml and its nginx configurations: healthchecks, start-up
// order, pinned images, the idgen nodes and the balancers in front of them.

import (
	"bytes"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idgen-project/idgen/app"
)

// composeFile has no top-level name: Compose v1, which CI runs, rejects one.
type composeFile struct {
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
	Networks    map[string]composeNetwork    `yaml:"networks"`
}

type composeNetwork struct {
	Aliases []string `yaml:"aliases"`
}

// defaultValue returns s with every ${NAME:-default} replaced by its
// default: what compose uses when the environment does not set NAME.
func defaultValue(s string) string {
	return regexp.MustCompile(`\$\{[A-Z_][A-Z0-9_]*:-([^}]*)\}`).ReplaceAllString(s, "$1")
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
			img := defaultValue(f.Services[name].Image)
			if img == "" {
				t.Errorf("service %s has no image", name)
				continue
			}
			if _, tag, ok := strings.Cut(img, ":"); !ok || tag == "latest" || strings.ContainsAny(img, "${}") {
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
			// The drain window, then three shutdown steps.
			drain, step := app.DefaultDrainWindow, app.DefaultShutdownTimeout
			for v, d := range map[string]*time.Duration{"IDGEN_DRAIN_WINDOW": &drain, "IDGEN_SHUTDOWN_TIMEOUT": &step} {
				if env[v] != "" {
					var err error
					if *d, err = time.ParseDuration(env[v]); err != nil {
						t.Errorf("%s: %s=%q: %v", name, v, env[v], err)
					}
				}
			}
			if d, err := time.ParseDuration(s.StopGrace); err != nil || d <= drain+3*step {
				t.Errorf("%s: stop_grace_period %q: want more than the drain window %v + 3 x %v to release the lease", name, s.StopGrace, drain, step)
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
			if !strings.HasPrefix(defaultValue(s.Image), "nginx:") {
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
			host, port, ok := nginxTarget(t, conf)
			if !ok {
				t.Errorf("%s: %s has no proxy_pass http://$VARIABLE:PORT with the variable set to a host name", name, conf)
				continue
			}
			// The balancer sends requests to a name that exactly the idgen
			// nodes it depends on carry, on their listen port.
			var want, got []string
			for dep := range s.DependsOn {
				if d := f.Services[dep]; d.idgenNode() {
					want = append(want, dep)
					if _, p, _ := net.SplitHostPort(d.Environment["IDGEN_LISTEN"]); p != port {
						t.Errorf("%s: sends to port %s, node %s listens on %s", name, port, dep, p)
					}
				}
			}
			for _, n := range names {
				if slices.Contains(f.Services[n].Networks["default"].Aliases, host) {
					got = append(got, n)
				}
			}
			sort.Strings(want)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("%s: %s sends to %s, an alias of %v; want the alias of the nodes it depends on %v", name, conf, host, got, want)
			}
			for _, p := range s.Ports {
				host, _, _ := strings.Cut(defaultValue(p), ":")
				published[host] = name
			}
		}
		if lb, ok := published["8080"]; !ok || len(f.Services[lb].Profiles) != 0 {
			t.Errorf("port 8080 published by %q (profiles %v): want a balancer that `docker compose up` starts without a profile", lb, f.Services[lb].Profiles)
		}
	})
}

// nginxTarget returns the host and port an nginx configuration proxies to
// with "set $VAR HOST;" and "proxy_pass http://$VAR:PORT;". A variable makes
// nginx resolve the name while it runs (through its resolver), not once
// at start.
func nginxTarget(t *testing.T, path string) (host, port string, ok bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !regexp.MustCompile(`(?m)^\s*resolver\s`).MatchString(text) {
		return "", "", false
	}
	m := regexp.MustCompile(`(?m)^\s*proxy_pass\s+http://\$(\w+):(\d+);`).FindStringSubmatch(text)
	if m == nil {
		return "", "", false
	}
	set := regexp.MustCompile(`(?m)^\s*set\s+\$` + m[1] + `\s+([\w.-]+);`).FindStringSubmatch(text)
	if set == nil {
		return "", "", false
	}
	return set[1], m[2], true
}
