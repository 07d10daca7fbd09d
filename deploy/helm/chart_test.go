package helm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
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

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "idgen"
	repoRoot = "../.."
	// dsnValues is the least a user must give: the database.
	dsnValues = "secret: {dsn: 'postgres://idgen:pw@db:5432/idgen?sslmode=verify-full'}\n"
)

// rendered is what the chart renders for one set of values: the objects by
// kind, each as JSON.
type rendered map[string][]json.RawMessage

// render renders the chart as `helm template` does, with values (YAML) over
// the chart's values.yaml, checked against values.schema.json.
func render(t *testing.T, values string) (rendered, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values %q: %v", values, err)
	}
	top, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{
		Name: "ids", Namespace: "ids", Revision: 3, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(chrt, top)
	if err != nil {
		return nil, err
	}
	out := rendered{}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, _helpers.tpl
		}
		for _, doc := range releaseutil.SplitManifests(files[name]) {
			raw, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			var meta struct{ Kind, APIVersion string }
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if string(raw) == "null" {
				continue // a template that rendered only comments
			}
			if meta.Kind == "" || meta.APIVersion == "" {
				t.Fatalf("%s: an object without kind or apiVersion:\n%s", name, doc)
			}
			out[meta.Kind] = append(out[meta.Kind], raw)
		}
	}
	return out, nil
}

func mustRender(t *testing.T, values string) rendered {
	t.Helper()
	r, err := render(t, values)
	if err != nil {
		t.Fatalf("render with %q: %v", values, err)
	}
	return r
}

// decodeStrict decodes raw into v, refusing fields v does not have: a
// misspelt field in a template is an error, not silently dropped.
func decodeStrict(t *testing.T, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, raw)
	}
}

// one decodes the only object of kind into v.
func (r rendered) one(t *testing.T, kind string, v any) {
	t.Helper()
	if len(r[kind]) != 1 {
		t.Fatalf("rendered %d %s objects, want 1 (kinds: %v)", len(r[kind]), kind, r.kinds())
	}
	decodeStrict(t, r[kind][0], v)
}

func (r rendered) kinds() []string {
	var ks []string
	for k, objs := range r {
		for range objs {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}

// manifest decodes one of deploy/k8s's manifests into v.
func manifest(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "k8s", file))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("k8s/%s: %v", file, err)
	}
	decodeStrict(t, raw, v)
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// idgenHelp returns the --help text of idgen's serve and migrate commands,
// from a binary built from this repository.
func idgenHelp(t *testing.T) (serve, migrate string) {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idgen-helm-test-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "idgen")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/idgen")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/idgen: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	help := func(sub string) string {
		out, err := exec.Command(binPath, sub, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("idgen %s --help: %v\n%s", sub, err, out)
		}
		return string(out)
	}
	return help("serve"), help("migrate")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// envOf returns a container's plain environment variables.
func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

// dockerfileUser returns the numeric user deploy/Dockerfile runs idgen as.
func dockerfileUser(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER\s+(\d+)`).FindAllSubmatch(data, -1)
	if m == nil {
		t.Fatal("deploy/Dockerfile sets no numeric USER")
	}
	uid, _ := strconv.ParseInt(string(m[len(m)-1][1]), 10, 64)
	return uid
}

// TestChartLint runs Helm's own chart checks (helm lint), which must find
// nothing worse than information.
func TestChartLint(t *testing.T) {
	vals, err := chartutil.ReadValues([]byte(dsnValues))
	if err != nil {
		t.Fatal(err)
	}
	res := lint.All(chartDir, vals, "ids", false)
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint: %v", m)
		}
	}
}

// TestChartDefaults renders the chart with only a DSN given and checks the
// objects: the probes, the graceful shutdown, the security context, the
// Secret, the migrate Job, and that each is the object deploy/k8s has.
func TestChartDefaults(t *testing.T) {
	r := mustRender(t, dsnValues)
	if got, want := r.kinds(), []string{"Deployment", "Job", "PodDisruptionBudget", "Secret", "Service"}; !slices.Equal(got, want) {
		t.Fatalf("rendered %v, want %v", got, want)
	}
	var dep, k8sDep appsv1.Deployment
	r.one(t, "Deployment", &dep)
	manifest(t, "deployment.yaml", &k8sDep)
	pod, k8sPod := dep.Spec.Template.Spec, k8sDep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(pod.Containers))
	}
	c, k8sC := pod.Containers[0], k8sPod.Containers[0]
	env := envOf(c)

	t.Run("selector", func(t *testing.T) {
		for k, v := range dep.Spec.Selector.MatchLabels {
			if dep.Spec.Template.Labels[k] != v {
				t.Errorf("selector %s=%s does not match the pod labels %v", k, v, dep.Spec.Template.Labels)
			}
		}
	})

	t.Run("ports and probes", func(t *testing.T) {
		_, port, ok := strings.Cut(env["IDGEN_LISTEN"], "0.0.0.0:")
		if !ok || port == "" {
			t.Fatalf("IDGEN_LISTEN=%q: want 0.0.0.0:PORT", env["IDGEN_LISTEN"])
		}
		if len(c.Ports) != 1 || c.Ports[0].Name != "http" || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port {
			t.Errorf("container ports %+v: want one named http, port %s (IDGEN_LISTEN)", c.Ports, port)
		}
		for _, tc := range []struct {
			name string
			p    *corev1.Probe
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
			if tc.p.HTTPGet.Path != tc.path || tc.p.HTTPGet.Port.String() != "http" {
				t.Errorf("%s: GET %s on port %s, want %s on http", tc.name, tc.p.HTTPGet.Path, tc.p.HTTPGet.Port.String(), tc.path)
			}
		}
	})

	t.Run("graceful shutdown", func(t *testing.T) {
		cmd := c.Lifecycle.PreStop.Exec.Command
		if len(cmd) != 2 || cmd[0] != "sleep" {
			t.Fatalf("preStop %q: want [sleep N]", cmd)
		}
		sleep, err := strconv.Atoi(cmd[1])
		if err != nil {
			t.Fatalf("preStop sleep %q: %v", cmd[1], err)
		}
		step, err := time.ParseDuration(env["IDGEN_SHUTDOWN_TIMEOUT"])
		if err != nil {
			t.Fatalf("IDGEN_SHUTDOWN_TIMEOUT=%q: %v", env["IDGEN_SHUTDOWN_TIMEOUT"], err)
		}
		drain, err := time.ParseDuration(env["IDGEN_DRAIN_WINDOW"])
		if err != nil {
			t.Fatalf("IDGEN_DRAIN_WINDOW=%q: %v", env["IDGEN_DRAIN_WINDOW"], err)
		}
		need := time.Duration(sleep)*time.Second + drain + 3*step
		if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= need {
			t.Errorf("terminationGracePeriodSeconds %v, want more than preStop %ds + drain window %v + 3 x %v", g, sleep, drain, step)
		}
		// The readiness probe sees the drain: it fails within the window.
		if p := c.ReadinessProbe; p == nil || time.Duration(p.PeriodSeconds*max(p.FailureThreshold, 1))*time.Second >= drain {
			t.Errorf("readinessProbe %+v: want periodSeconds x failureThreshold below the drain window %v", p, drain)
		}
		ttl, err1 := time.ParseDuration(env["IDGEN_LEASE_TTL"])
		hb, err2 := time.ParseDuration(env["IDGEN_HEARTBEAT"])
		if err1 != nil || err2 != nil || hb > ttl/2 {
			t.Errorf("IDGEN_LEASE_TTL=%q IDGEN_HEARTBEAT=%q: want durations, heartbeat at most ttl/2", env["IDGEN_LEASE_TTL"], env["IDGEN_HEARTBEAT"])
		}
	})

	uid := dockerfileUser(t)
	checkNonRoot := func(t *testing.T, what string, pod corev1.PodSpec) {
		t.Helper()
		psc := pod.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != uid {
			t.Errorf("%s pod securityContext %+v: want runAsNonRoot and runAsUser %d (the image's USER)", what, psc, uid)
		}
		for _, c := range pod.Containers {
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s container %s: no securityContext", what, c.Name)
			case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != uid:
				t.Errorf("%s container %s: want runAsNonRoot and runAsUser %d", what, c.Name, uid)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s container %s: allowPrivilegeEscalation is not false", what, c.Name)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s container %s: readOnlyRootFilesystem is not true", what, c.Name)
			case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
				t.Errorf("%s container %s: capabilities %+v, want drop ALL", what, c.Name, sc.Capabilities)
			}
		}
	}
	t.Run("non-root", func(t *testing.T) { checkNonRoot(t, "Deployment", pod) })

	var secret corev1.Secret
	r.one(t, "Secret", &secret)
	t.Run("secret", func(t *testing.T) {
		if secret.StringData["IDGEN_DSN"] != "postgres://idgen:pw@db:5432/idgen?sslmode=verify-full" {
			t.Errorf("Secret IDGEN_DSN=%q, want the DSN of the values", secret.StringData["IDGEN_DSN"])
		}
		for _, k := range []string{"IDGEN_DSN", "IDGEN_ADMIN_TOKEN"} {
			if _, ok := env[k]; ok {
				t.Errorf("%s is set in plain text in the Deployment; it belongs in the Secret", k)
			}
		}
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != secret.Name {
			t.Errorf("container envFrom %+v: want the Secret %s", c.EnvFrom, secret.Name)
		}
		if env["IDGEN_MIGRATE"] != "false" {
			t.Errorf("IDGEN_MIGRATE=%q: pods must leave migrations to the Job", env["IDGEN_MIGRATE"])
		}
	})

	var job, k8sJob batchv1.Job
	r.one(t, "Job", &job)
	manifest(t, "migrate-job.yaml", &k8sJob)
	t.Run("migrate job", func(t *testing.T) {
		jc := job.Spec.Template.Spec.Containers
		if len(jc) != 1 || !slices.Equal(jc[0].Args, []string{"migrate", "up"}) || jc[0].Image != c.Image {
			t.Fatalf("Job containers %+v: want one running `migrate up` with image %s", jc, c.Image)
		}
		if len(jc[0].EnvFrom) != 1 || jc[0].EnvFrom[0].SecretRef.Name != secret.Name {
			t.Errorf("Job envFrom %+v: want the Secret %s", jc[0].EnvFrom, secret.Name)
		}
		if !strings.HasSuffix(job.Name, "-migrate-3") {
			t.Errorf("Job name %s: want the release revision (3) at the end", job.Name)
		}
		checkNonRoot(t, "Job", job.Spec.Template.Spec)
	})

	var svc, k8sSvc corev1.Service
	r.one(t, "Service", &svc)
	manifest(t, "service.yaml", &k8sSvc)
	var pdb, k8sPDB policyv1.PodDisruptionBudget
	r.one(t, "PodDisruptionBudget", &pdb)
	manifest(t, "pdb.yaml", &k8sPDB)
	t.Run("selectors", func(t *testing.T) {
		for what, sel := range map[string]map[string]string{"Service": svc.Spec.Selector, "PodDisruptionBudget": pdb.Spec.Selector.MatchLabels} {
			if len(sel) == 0 {
				t.Errorf("%s selects nothing", what)
			}
			for k, v := range sel {
				if dep.Spec.Template.Labels[k] != v {
					t.Errorf("%s selector %s=%s does not select the pods", what, k, v)
				}
			}
		}
	})

	// The chart renders deploy/k8s's objects: names and labels differ (the
	// release's), settings do not.
	t.Run("same as deploy/k8s", func(t *testing.T) {
		same := func(what string, got, want any) {
			t.Helper()
			if !equality.Semantic.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("%s differs from deploy/k8s:\n chart: %s\n   k8s: %s", what, g, w)
			}
		}
		same("Deployment strategy", dep.Spec.Strategy, k8sDep.Spec.Strategy)
		same("replicas", dep.Spec.Replicas, k8sDep.Spec.Replicas)
		same("terminationGracePeriodSeconds", pod.TerminationGracePeriodSeconds, k8sPod.TerminationGracePeriodSeconds)
		same("pod securityContext", pod.SecurityContext, k8sPod.SecurityContext)
		same("automountServiceAccountToken", pod.AutomountServiceAccountToken, k8sPod.AutomountServiceAccountToken)
		same("enableServiceLinks", pod.EnableServiceLinks, k8sPod.EnableServiceLinks)
		same("args", c.Args, k8sC.Args)
		same("ports", c.Ports, k8sC.Ports)
		same("readinessProbe", c.ReadinessProbe, k8sC.ReadinessProbe)
		same("livenessProbe", c.LivenessProbe, k8sC.LivenessProbe)
		same("startupProbe", c.StartupProbe, k8sC.StartupProbe)
		same("lifecycle", c.Lifecycle, k8sC.Lifecycle)
		same("resources", c.Resources, k8sC.Resources)
		same("container securityContext", c.SecurityContext, k8sC.SecurityContext)
		same("environment", env, envOf(k8sC))
		same("Secret keys", slices.Sorted(mapKeys(secret.StringData)), []string{"IDGEN_ADMIN_TOKEN", "IDGEN_DSN"})
		jp, kp := job.Spec.Template.Spec, k8sJob.Spec.Template.Spec
		same("Job backoffLimit", job.Spec.BackoffLimit, k8sJob.Spec.BackoffLimit)
		same("Job ttlSecondsAfterFinished", job.Spec.TTLSecondsAfterFinished, k8sJob.Spec.TTLSecondsAfterFinished)
		same("Job restartPolicy", jp.RestartPolicy, kp.RestartPolicy)
		same("Job args", jp.Containers[0].Args, kp.Containers[0].Args)
		same("Job resources", jp.Containers[0].Resources, kp.Containers[0].Resources)
		same("Job container securityContext", jp.Containers[0].SecurityContext, kp.Containers[0].SecurityContext)
		same("Service type", svc.Spec.Type, k8sSvc.Spec.Type)
		same("Service ports", svc.Spec.Ports, k8sSvc.Spec.Ports)
		same("PodDisruptionBudget maxUnavailable", pdb.Spec.MaxUnavailable, k8sPDB.Spec.MaxUnavailable)
	})
}

func mapKeys[M ~map[K]V, K comparable, V any](m M) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestChartConfigMirrorsFlags checks values.yaml's config against the idgen
// binary: the schema admits exactly serve's flags (less those the chart
// sets itself), each becomes the variable serve reads for it, and every
// IDGEN_ variable the chart sets is one serve or migrate reads.
func TestChartConfigMirrorsFlags(t *testing.T) {
	serve, migrate := idgenHelp(t)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z][a-z-]*)`).FindAllStringSubmatch(serve, -1) {
		flags[m[1]] = true
	}
	if len(flags) < 5 {
		t.Fatalf("idgen serve --help lists %d flags:\n%s", len(flags), serve)
	}
	// The chart sets four flags itself; --config and --print-config are
	// for a person at a shell: the chart's values are the configuration.
	chartSets := []string{"listen", "migrate", "dsn", "admin-token", "config", "print-config"}

	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Config struct {
				Properties           map[string]json.RawMessage `json:"properties"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
			} `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	cfg := schema.Properties.Config
	if cfg.AdditionalProperties == nil || *cfg.AdditionalProperties {
		t.Error("values.schema.json: config admits names that are no flag (additionalProperties is not false)")
	}
	got := slices.Sorted(mapKeys(cfg.Properties))
	var want []string
	for f := range flags {
		if !slices.Contains(chartSets, f) {
			want = append(want, f)
		}
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("values.schema.json config: got %v, want idgen serve's flags %v", got, want)
	}
	// The largest max-count the schema admits is the binary's.
	var maxCount struct {
		Maximum int `json:"maximum"`
	}
	if err := json.Unmarshal(cfg.Properties["max-count"], &maxCount); err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?s)--max-count N\s.*?\b1 to\s+([0-9]+)\b`).FindStringSubmatch(serve); m == nil || m[1] != strconv.Itoa(maxCount.Maximum) {
		t.Errorf("values.schema.json admits max-count up to %d, idgen serve --help says %v", maxCount.Maximum, m)
	}

	// Every flag set, with a valid value, reaches the variable serve reads.
	values := dsnValues + `config:
  datacenter: 3
  worker-ids: 0-15
  layout: 41/5/5/12
  epoch: "2026-01-01T00:00:00Z"
  lease-ttl: 20s
  heartbeat: 5s
  holder: node-a
  max-count: 500
  log-format: text
  log-level: debug
  shutdown-timeout: 5s
  drain-window: 2s
  allow-unsafe-durability: true
  addr-file: /var/run/idgen/addr
  tokens-file: /etc/idgen/tokens
  public-status-details: true
  lease-api-min-ttl: 5s
  lease-api-max-ttl: 10m
  lease-api-worker-ids: 16-31
  lease-api-max-leases: 4
  lease-api-acquire-rate: 2
  lease-api-acquire-burst: 5
  lease-events-retention: 240h
  lease-margin: 4s
  max-clock-offset: 2s
  max-backward-wait: 20ms
  random-sequence-start: true
  segment-prefetch-threshold: 0.25
  segment-grow-below: 10m
  segment-shrink-above: 40m
  rate-limit: 100
  rate-burst: 500
  rate-limit-addresses: 1000
  tracing: true
  trace-sample-ratio: 0.5
  audit-sink: stdout
  audit-buffer: 1000
  audit-batch: 100
  audit-flush-interval: 2s
  audit-block-interval: 5s
  id-format: base32,orders=hex
  etcd-compact-retention: 10m
  state-file: /var/lib/idgen/state
`
	var dep appsv1.Deployment
	mustRender(t, values).one(t, "Deployment", &dep)
	env := envOf(dep.Spec.Template.Spec.Containers[0])
	var cfgVals map[string]map[string]any
	if err := yaml.Unmarshal([]byte(values), &cfgVals); err != nil {
		t.Fatal(err)
	}
	for flag, v := range cfgVals["config"] {
		name := "IDGEN_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
		if !strings.Contains(serve, "["+name+"]") {
			t.Errorf("config.%s becomes %s, which idgen serve does not read for --%s", flag, name, flag)
		}
		if got, want := env[name], fmt.Sprint(v); got != want {
			t.Errorf("config.%s: %s=%q, want %q", flag, name, got, want)
		}
	}
	for _, f := range slices.Sorted(mapKeys(cfgVals["config"])) {
		delete(flags, f)
	}
	for _, f := range chartSets {
		delete(flags, f)
	}
	if len(flags) > 0 {
		t.Errorf("the test sets no value for the flags %v", slices.Sorted(mapKeys(flags)))
	}

	// Every variable the chart sets anywhere is one idgen reads.
	r := mustRender(t, values+"prometheusRule: {enabled: true}\nserviceMonitor: {enabled: true}\n")
	var all bytes.Buffer
	for _, objs := range r {
		for _, o := range objs {
			all.Write(o)
		}
	}
	for _, name := range slices.Compact(slices.Sorted(slices.Values(regexp.MustCompile(`\bIDGEN_[A-Z_]+\b`).FindAllString(all.String(), -1)))) {
		if !strings.Contains(serve, "["+name+"]") && !strings.Contains(migrate, "["+name+"]") {
			t.Errorf("the chart sets %s, which neither idgen serve nor idgen migrate reads", name)
		}
	}
}

// TestChartValues checks the choices values.yaml offers, and that bad
// values are refused when rendering (the schema, and the required DSN).
func TestChartValues(t *testing.T) {
	t.Run("existing secret", func(t *testing.T) {
		r := mustRender(t, "secret: {existingSecret: idgen-credentials}\n")
		if len(r["Secret"]) != 0 {
			t.Errorf("rendered %d Secrets, want none: the user's own is named", len(r["Secret"]))
		}
		var dep appsv1.Deployment
		r.one(t, "Deployment", &dep)
		var job batchv1.Job
		r.one(t, "Job", &job)
		for what, c := range map[string]corev1.Container{"Deployment": dep.Spec.Template.Spec.Containers[0], "Job": job.Spec.Template.Spec.Containers[0]} {
			if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != "idgen-credentials" {
				t.Errorf("%s envFrom %+v: want idgen-credentials", what, c.EnvFrom)
			}
		}
	})

	t.Run("no migrate job", func(t *testing.T) {
		r := mustRender(t, dsnValues+"migrate: {enabled: false}\n")
		if len(r["Job"]) != 0 {
			t.Errorf("rendered %d Jobs, want none", len(r["Job"]))
		}
		var dep appsv1.Deployment
		r.one(t, "Deployment", &dep)
		if got := envOf(dep.Spec.Template.Spec.Containers[0])["IDGEN_MIGRATE"]; got != "true" {
			t.Errorf("IDGEN_MIGRATE=%q without the Job, want true: someone must migrate", got)
		}
	})

	t.Run("port", func(t *testing.T) {
		var dep appsv1.Deployment
		var svc corev1.Service
		r := mustRender(t, dsnValues+"service: {port: 9090}\n")
		r.one(t, "Deployment", &dep)
		r.one(t, "Service", &svc)
		c := dep.Spec.Template.Spec.Containers[0]
		if envOf(c)["IDGEN_LISTEN"] != "0.0.0.0:9090" || c.Ports[0].ContainerPort != 9090 || svc.Spec.Ports[0].Port != 9090 {
			t.Errorf("service.port 9090: IDGEN_LISTEN=%q, containerPort %d, Service port %d", envOf(c)["IDGEN_LISTEN"], c.Ports[0].ContainerPort, svc.Spec.Ports[0].Port)
		}
	})

	t.Run("image", func(t *testing.T) {
		var dep appsv1.Deployment
		mustRender(t, dsnValues).one(t, "Deployment", &dep)
		chrt, err := loader.Load(chartDir)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := dep.Spec.Template.Spec.Containers[0].Image, "idgen:"+chrt.Metadata.AppVersion; got != want {
			t.Errorf("image %s, want %s (the chart's appVersion)", got, want)
		}
		mustRender(t, dsnValues+"image: {repository: registry.example/idgen, tag: v1.2.3}\n").one(t, "Deployment", &dep)
		if got := dep.Spec.Template.Spec.Containers[0].Image; got != "registry.example/idgen:v1.2.3" {
			t.Errorf("image %s, want registry.example/idgen:v1.2.3", got)
		}
	})

	t.Run("monitoring", func(t *testing.T) {
		r := mustRender(t, dsnValues+"serviceMonitor: {enabled: true, labels: {release: prom}}\nprometheusRule: {enabled: true, labels: {release: prom}}\n")
		var svc corev1.Service
		r.one(t, "Service", &svc)
		type object struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec map[string]any `json:"spec"`
		}
		var sm, rule object
		r.one(t, "ServiceMonitor", &sm)
		r.one(t, "PrometheusRule", &rule)
		for _, o := range []object{sm, rule} {
			if o.Metadata.Labels["release"] != "prom" {
				t.Errorf("%s labels %v: want release=prom from the values", o.Kind, o.Metadata.Labels)
			}
		}
		var k8sSM, k8sRule object
		manifest(t, "servicemonitor.yaml", &k8sSM)
		manifest(t, "prometheusrule.yaml", &k8sRule)
		if !equality.Semantic.DeepEqual(sm.Spec["endpoints"], k8sSM.Spec["endpoints"]) {
			t.Errorf("ServiceMonitor endpoints %v, want deploy/k8s's %v", sm.Spec["endpoints"], k8sSM.Spec["endpoints"])
		}
		sel, _ := sm.Spec["selector"].(map[string]any)["matchLabels"].(map[string]any)
		for k, v := range sel {
			if svc.Labels[k] != v {
				t.Errorf("ServiceMonitor selector %s=%v does not select the Service (labels %v)", k, v, svc.Labels)
			}
		}
		if !equality.Semantic.DeepEqual(rule.Spec, k8sRule.Spec) {
			t.Error("PrometheusRule spec differs from deploy/k8s/prometheusrule.yaml's: copy the rules to idgen/files/alerts.yaml")
		}
		if len(rule.Spec) == 0 {
			t.Error("PrometheusRule has no spec")
		}
	})

	for _, tc := range []struct {
		name, values, want string
	}{
		{"no DSN", "", "secret.dsn is required"},
		{"unknown config name", dsnValues + "config: {lease_ttl: 30s}\n", "lease_ttl"},
		{"duration without unit", dsnValues + "config: {lease-ttl: \"30\"}\n", "lease-ttl"},
		{"bad log format", dsnValues + "config: {log-format: xml}\n", "log-format"},
		{"negative datacenter", dsnValues + "config: {datacenter: -1}\n", "datacenter"},
		{"bad worker range", dsnValues + "config: {worker-ids: \"0..15\"}\n", "worker-ids"},
		{"max-count above the binary's limit", dsnValues + "config: {max-count: 262145}\n", "max-count"},
		{"no replicas", dsnValues + "replicaCount: 0\n", "replicaCount"},
		{"unknown secret field", dsnValues + "secret: {password: x}\n", "password"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			_, err := render(t, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render with %q: got error %v, want one naming %q", tc.values, err, tc.want)
			}
		})
	}
}

// TestChartExtraEnv checks that extraEnv reaches the idgen container, after
// the variables the chart sets, and that the schema refuses an entry with
// no name.
func TestChartExtraEnv(t *testing.T) {
	var dep appsv1.Deployment
	mustRender(t, dsnValues+`extraEnv:
  - name: OTEL_EXPORTER_OTLP_ENDPOINT
    value: http://collector:4318
config:
  tracing: true
`).one(t, "Deployment", &dep)
	env := envOf(dep.Spec.Template.Spec.Containers[0])
	if got, want := env["OTEL_EXPORTER_OTLP_ENDPOINT"], "http://collector:4318"; got != want {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT = %q, want %q", got, want)
	}
	if got, want := env["IDGEN_TRACING"], "true"; got != want {
		t.Errorf("IDGEN_TRACING = %q, want %q", got, want)
	}
	if _, err := render(t, dsnValues+"extraEnv:\n  - value: x\n"); err == nil {
		t.Error("an extraEnv entry without a name rendered; want the schema to refuse it")
	}
}
