package deploy_test

// The Kubernetes manifests in k8s/: probes, ports, security context, graceful
// shutdown, the Secret, the migrate Job, monitoring and the kustomization.

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

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
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
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
		// The drain window: after SIGTERM the pod answers 503 on /readyz
		// and keeps serving until the readiness probe has seen it.
		drain, err := time.ParseDuration(c.env("IDGEN_DRAIN_WINDOW"))
		if err != nil || drain <= 0 {
			t.Fatalf("IDGEN_DRAIN_WINDOW=%q: want a duration above 0 (%v)", c.env("IDGEN_DRAIN_WINDOW"), err)
		}
		p := c.ReadinessProbe
		if p == nil || p.PeriodSeconds != 1 {
			t.Errorf("readinessProbe periodSeconds: want 1, so that a draining pod leaves the endpoints within a second or two")
		} else if noticed := time.Duration(p.PeriodSeconds*max(p.FailureThreshold, 1)) * time.Second; noticed >= drain {
			t.Errorf("readinessProbe notices a draining pod after %v, want less than IDGEN_DRAIN_WINDOW %v", noticed, drain)
		}
		need := time.Duration(sleep)*time.Second + drain + 3*step
		if pod.TerminationGracePeriodSeconds == nil {
			t.Fatal("terminationGracePeriodSeconds not set (the default 30 s is too short)")
		}
		if got := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; got <= need {
			t.Errorf("terminationGracePeriodSeconds %v, want more than preStop %ds + drain window %v + 3 x %v = %v", got, sleep, drain, step, need)
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

// alertRule is one rule of the PrometheusRule.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// loadAlertRules returns the rules of deploy/k8s's PrometheusRule.
func loadAlertRules(t *testing.T) []alertRule {
	t.Helper()
	var spec struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	one(t, loadManifests(t), "PrometheusRule", &spec)
	var rules []alertRule
	for _, g := range spec.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("PrometheusRule has no rules")
	}
	return rules
}

// targetLabels are the labels Prometheus (with the Prometheus Operator's
// ServiceMonitor) adds to every series it scrapes from a pod.
var targetLabels = []string{"namespace", "job", "pod", "instance", "service", "container", "endpoint"}

var (
	selectorRE = regexp.MustCompile(`\b(idgen_[a-z_]+)(?:\{([^}]*)\})?`)
	matcherRE  = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	byRE       = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	headingRE  = regexp.MustCompile(`(?m)^#+\s+(.+)$`)
)

// TestAlertRules checks every alert of deploy/k8s/prometheusrule.yaml
// against a real server's /metrics: the series its expression selects
// exist with the labels and label values it matches on, the labels it
// aggregates by exist, and its runbook is a section of docs/operations.md.
// The lifetime, latency and worker-pool alerts are checked for what they
// must say.
func TestAlertRules(t *testing.T) {
	rules := loadAlertRules(t)
	got := scrapeMetrics(t)
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(string(ops), -1) {
		anchors[githubAnchor(m[1])] = true
	}

	// seriesOf returns the series of /metrics named name exactly.
	seriesOf := func(name string) []string {
		var out []string
		for _, s := range got.series {
			if s == name || strings.HasPrefix(s, name+"{") {
				out = append(out, s)
			}
		}
		return out
	}

	names := map[string]bool{}
	for _, r := range rules {
		t.Run(r.Alert, func(t *testing.T) {
			if !regexp.MustCompile(`^Idgen[A-Z][A-Za-z]+$`).MatchString(r.Alert) || names[r.Alert] {
				t.Errorf("alert name %q: want a unique IdgenCamelCase name", r.Alert)
			}
			names[r.Alert] = true
			if sev := r.Labels["severity"]; sev != "warning" && sev != "critical" {
				t.Errorf("severity %q: want warning or critical", sev)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("for %q: %v", r.For, err)
				}
			}
			if r.Annotations["summary"] == "" {
				t.Error("no summary annotation")
			}
			file, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "#")
			if file != "docs/operations.md" || !anchors[anchor] {
				t.Errorf("runbook_url %q: want docs/operations.md#<a heading of it>", r.Annotations["runbook_url"])
			}

			labels := map[string]bool{}
			for _, l := range targetLabels {
				labels[l] = true
			}
			sels := selectorRE.FindAllStringSubmatch(r.Expr, -1)
			if len(sels) == 0 {
				t.Fatalf("expr %q selects no idgen_ metric", r.Expr)
			}
			for _, sel := range sels {
				series := seriesOf(sel[1])
				if len(series) == 0 {
					t.Errorf("expr selects %s: /metrics has no such series", sel[1])
					continue
				}
				for _, s := range series {
					for _, m := range matcherRE.FindAllStringSubmatch(s, -1) {
						labels[m[1]] = true
					}
				}
				for _, m := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
					label, value := m[1], m[3]
					if !slices.ContainsFunc(series, func(s string) bool { return strings.Contains(s, label+`="`) }) {
						t.Errorf("expr matches %s on label %s, which its series do not have", sel[1], label)
					}
					if m[2] != "=" {
						continue
					}
					switch label {
					case "route":
						if !got.routes[value] {
							t.Errorf("expr matches route=%q: the server has no such route", value)
						}
					case "code":
						if n, err := strconv.Atoi(value); err != nil || n < 100 || n > 599 {
							t.Errorf("expr matches code=%q: not an HTTP status", value)
						}
					}
				}
			}
			for _, by := range byRE.FindAllStringSubmatch(r.Expr, -1) {
				for l := range strings.SplitSeq(by[1], ",") {
					if l = strings.TrimSpace(l); !labels[l] {
						t.Errorf("expr aggregates by %q, a label neither its series nor Prometheus's targets have", l)
					}
				}
			}
		})
	}

	expr := func(alert string) string {
		for _, r := range rules {
			if r.Alert == alert {
				return r.Expr
			}
		}
		t.Errorf("no alert %s", alert)
		return ""
	}
	t.Run("layout lifetime", func(t *testing.T) {
		m := regexp.MustCompile(`idgen_layout_remaining_seconds\)?\s*<\s*([0-9.e+]+)`).FindStringSubmatch(expr("IdgenLayoutEndNear"))
		if m == nil {
			t.Fatal("IdgenLayoutEndNear does not compare idgen_layout_remaining_seconds < N")
		}
		twoYears := (2 * 365 * 24 * time.Hour).Seconds()
		if n, err := strconv.ParseFloat(m[1], 64); err != nil || n < twoYears {
			t.Errorf("IdgenLayoutEndNear fires under %s s, want at least two years (%v s)", m[1], twoYears)
		}
	})
	t.Run("ids latency", func(t *testing.T) {
		e := expr("IdgenSlowIDs")
		m := regexp.MustCompile(`histogram_quantile\(0\.99,.*idgen_http_request_duration_seconds_bucket\{[^}]*route="/ids"[^}]*\}.*\)\s*>\s*([0-9.]+)`).FindStringSubmatch(e)
		if m == nil {
			t.Fatalf("IdgenSlowIDs %q: want the p99 of idgen_http_request_duration_seconds on route /ids > threshold", e)
		}
		// The threshold is a bucket boundary, where the quantile is exact.
		le := `le="` + m[1] + `"`
		if !slices.ContainsFunc(got.series, func(s string) bool {
			return strings.HasPrefix(s, "idgen_http_request_duration_seconds_bucket{") && strings.Contains(s, le)
		}) {
			t.Errorf("IdgenSlowIDs threshold %s s is no bucket boundary of idgen_http_request_duration_seconds", m[1])
		}
	})
	t.Run("worker pool", func(t *testing.T) {
		e := expr("IdgenWorkerPoolNearlyFull")
		if !strings.Contains(e, "idgen_worker_pool_held / idgen_worker_pool_size") {
			t.Errorf("IdgenWorkerPoolNearlyFull %q: want the share idgen_worker_pool_held / idgen_worker_pool_size", e)
		}
		if regexp.MustCompile(`\b32\b`).MatchString(e) {
			t.Errorf("IdgenWorkerPoolNearlyFull %q hard-codes the default pool of 32", e)
		}
	})
}

// githubAnchor is the fragment GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
