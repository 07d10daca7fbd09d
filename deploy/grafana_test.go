package deploy_test

// The Grafana dashboard in grafana/ and the alert rules in k8s/ against real
// nodes' /metrics: every metric they query must be exported, with the labels
// they match on, aggregate by or join on. The PromQL is read by a small
// extractor of this file (selectors, matchers, by/without/on/ignoring/group_*
// clauses) rather than by github.com/prometheus/prometheus/promql/parser: that
// module is not in go.mod and would bring the Prometheus server's dependency
// tree with it for one test.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

const (
	dashboardFile = "grafana/idgen.json"
	// grafanaSchemaVersion is the dashboard schema Grafana 10.4 and 11.0–11.2
	// save; later versions migrate it when they load the dashboard.
	grafanaSchemaVersion = 39
	// instanceMatcher is the matcher every selector of the dashboard carries,
	// so that the instance variable applies to every panel.
	instanceMatcher = `instance=~"$instance"`
)

// dashboardLeftOut are the idgen metric families the dashboard does not
// show, and why. Every other family /metrics exports must be on it.
var dashboardLeftOut = map[string]string{
	"idgen_lease_age_seconds":               "claims and takeovers show when a lease changed hands",
	"idgen_segment_max_id":                  "a counter's position, for the status page and idgen namespaces list",
	"idgen_segment_fallbacks_total":         "draws; the fallback panel shows the IDs, which is what matters",
	"idgen_tokens":                          "only with --tokens-file; reloads are logged",
	"idgen_tokens_reloads_total":            "only with --tokens-file; reloads are logged",
	"idgen_tokens_reload_errors_total":      "only with --tokens-file; a refused reload is logged at error level",
	"idgen_lease_events_pruned_total":       "only with --lease-events-retention; housekeeping",
	"idgen_lease_events_prune_errors_total": "only with --lease-events-retention; a failed prune is logged",
	"idgen_sequence_expired_total":          "housekeeping of the sequences' ledger; the ledger says what expired",
	"idgen_sequence_sweep_errors_total":     "housekeeping; a failed sweep is logged and the next one tries again",
}

// grafanaDatasource is a panel's, a target's or a variable's data source.
type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID          int                `json:"id"`
	Type        string             `json:"type"`
	Title       string             `json:"title"`
	Description string             `json:"description"`
	Collapsed   bool               `json:"collapsed"`
	Datasource  *grafanaDatasource `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string             `json:"refId"`
		Expr       string             `json:"expr"`
		Datasource *grafanaDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

type grafanaVariable struct {
	Type       string             `json:"type"`
	Name       string             `json:"name"`
	Query      json.RawMessage    `json:"query"`
	Definition string             `json:"definition"`
	Datasource *grafanaDatasource `json:"datasource"`
	IncludeAll bool               `json:"includeAll"`
	AllValue   string             `json:"allValue"`
	Multi      bool               `json:"multi"`
}

type grafanaDashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

// loadDashboard reads the dashboard; a file that is not one JSON object
// fails the test.
func loadDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var d grafanaDashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: data after the dashboard object", dashboardFile)
	}
	return d
}

// allPanels returns the panels of d, a collapsed row's included.
func (d grafanaDashboard) allPanels() []grafanaPanel {
	var out []grafanaPanel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// variableQuery returns the PromQL query of a query variable: Grafana 10
// and later save it as {"query": …}, older ones as a string.
func (v grafanaVariable) variableQuery() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var q struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &q)
	return q.Query
}

// labelValuesRE is Grafana's label_values(selector, label) variable query.
var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// TestGrafanaDashboard checks the dashboard's shape: JSON Grafana 10 and 11
// import, a datasource and an instance variable, and panels that each
// query the chosen datasource, filter by the chosen instances and do not
// overlap.
func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	if d.SchemaVersion != grafanaSchemaVersion {
		t.Errorf("schemaVersion %d, want %d", d.SchemaVersion, grafanaSchemaVersion)
	}

	vars := map[string]grafanaVariable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || string(v.Query) != `"prometheus"` {
		t.Errorf("variable datasource %+v: want one of type datasource over prometheus", v)
	}
	inst, ok := vars["instance"]
	switch {
	case !ok || inst.Type != "query":
		t.Errorf("variable instance %+v: want a query variable", inst)
	case inst.Datasource == nil || inst.Datasource.UID != "${datasource}":
		t.Errorf("variable instance queries %+v, want the datasource variable", inst.Datasource)
	case !inst.IncludeAll || inst.AllValue != ".*" || !inst.Multi:
		t.Errorf("variable instance: includeAll %v, allValue %q, multi %v; want true, \".*\", true", inst.IncludeAll, inst.AllValue, inst.Multi)
	}
	if m := labelValuesRE.FindStringSubmatch(inst.variableQuery()); m == nil || m[2] != "instance" {
		t.Errorf("variable instance query %q: want label_values(<idgen metric>, instance)", inst.variableQuery())
	}

	type rect struct {
		id         int
		x, y, w, h int
	}
	var rects []rect
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.allPanels() {
		name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 || ids[p.ID] {
			t.Errorf("%s: id not positive or not unique", name)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24 columns", name, g)
		}
		for _, r := range rects {
			if g.X < r.x+r.w && r.x < g.X+g.W && g.Y < r.y+r.h && r.y < g.Y+g.H {
				t.Errorf("%s overlaps panel %d", name, r.id)
			}
		}
		if !p.Collapsed {
			rects = append(rects, rect{p.ID, g.X, g.Y, g.W, g.H})
		}
		switch p.Type {
		case "row":
			if !p.Collapsed && len(p.Panels) > 0 {
				t.Errorf("%s: an open row holds panels", name)
			}
			continue
		case "timeseries", "stat", "gauge", "bargauge", "table":
		default:
			t.Errorf("%s: type %q, want a core panel of Grafana 10 and 11", name, p.Type)
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("%s: want a title and a description", name)
		}
		if p.Datasource == nil || *p.Datasource != (grafanaDatasource{"prometheus", "${datasource}"}) {
			t.Errorf("%s: datasource %+v, want the datasource variable", name, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s has no query", name)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			queries++
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: refId %q empty or repeated", name, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource != nil && *tg.Datasource != *p.Datasource {
				t.Errorf("%s query %s: datasource %+v differs from the panel's", name, tg.RefID, tg.Datasource)
			}
			q, err := parsePromQL(tg.Expr)
			if err != nil {
				t.Errorf("%s query %s %q: %v", name, tg.RefID, tg.Expr, err)
				continue
			}
			if len(q.Selectors) == 0 {
				t.Errorf("%s query %s %q selects no metric", name, tg.RefID, tg.Expr)
			}
			for _, s := range q.Selectors {
				if !slices.Contains(s.Matchers, promMatcher{"instance", "=~", "$instance"}) {
					t.Errorf("%s query %s: %s lacks %s", name, tg.RefID, s.Metric, instanceMatcher)
				}
			}
		}
	}
	if queries == 0 {
		t.Error("the dashboard has no query")
	}
}

// TestMonitoringQueriesExported checks every query of the dashboard (its
// panels and its instance variable) and of the alert rules against the
// /metrics of a node that served the traffic each series needs: the
// metrics exist, with the labels the queries match on and group by, and
// with the label values they match exactly. Every idgen metric family is
// on the dashboard or in dashboardLeftOut.
func TestMonitoringQueriesExported(t *testing.T) {
	idx := newSeriesIndex(t, scrapeWithTraffic(t)...)
	d := loadDashboard(t)

	check := func(where, expr string) {
		t.Helper()
		q, err := parsePromQL(expr)
		if err != nil {
			t.Errorf("%s %q: %v", where, expr, err)
			return
		}
		for _, problem := range idx.check(q) {
			t.Errorf("%s: %s", where, problem)
		}
	}
	shown := map[string]bool{} // the families the dashboard's panels query
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			check(fmt.Sprintf("dashboard panel %q query %s", p.Title, tg.RefID), tg.Expr)
			if q, err := parsePromQL(tg.Expr); err == nil {
				for _, s := range q.Selectors {
					shown[idx.family(s.Metric)] = true
				}
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesRE.FindStringSubmatch(v.variableQuery())
		if m == nil {
			t.Errorf("dashboard variable %s: query %q is no label_values(selector, label)", v.Name, v.variableQuery())
			continue
		}
		check("dashboard variable "+v.Name, fmt.Sprintf("group by (%s) (%s)", m[2], m[1]))
	}
	for _, r := range loadAlertRules(t) {
		check("alert "+r.Alert, r.Expr)
	}

	for _, f := range slices.Sorted(maps.Keys(idx.families)) {
		if !strings.HasPrefix(f, "idgen_") {
			continue
		}
		why, left := dashboardLeftOut[f]
		switch {
		case shown[f] && left:
			t.Errorf("%s is on the dashboard and in dashboardLeftOut (%s)", f, why)
		case !shown[f] && !left:
			t.Errorf("/metrics exports %s: show it on the dashboard, or say in dashboardLeftOut why not", f)
		}
	}
	for f := range dashboardLeftOut {
		if _, ok := idx.families[f]; !ok {
			t.Errorf("dashboardLeftOut names %s, which /metrics does not export", f)
		}
	}
}

// scrapeWithTraffic returns the /metrics of two nodes after the traffic
// that makes every labelled series appear. The first has a tokens file, a
// rate limit and lease-event pruning (so that every metric family is
// exported) and a namespace; it serves Snowflake and namespace draws over
// HTTP, a bad request, a rate-limit refusal, gRPC unary calls (one ok, one
// invalid) and a stream. The second cannot claim a worker ID, which another
// holder has: it answers 503 over HTTP and unavailable over gRPC.
func scrapeWithTraffic(t *testing.T) []string {
	t.Helper()
	const caller, greedy = "dashboard-caller-secret", "dashboard-greedy-secret"
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	file := fmt.Sprintf("caller ids %s\ngreedy ids %s\n", hash(caller), hash(greedy))
	if err := os.WriteFile(tokens, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	const maxCount = 100
	srv := testserver.MustStart(t, testserver.Options{
		TokensFile: tokens,
		MaxCount:   maxCount,
		// One bucket of maxCount IDs per caller, refilled at one ID in
		// 1000 s: greedy's second full draw is refused.
		RateLimit:            idgen.RateLimit{Rate: 0.001, Burst: maxCount},
		LeaseEventsRetention: 24 * time.Hour,
	})
	srv.CreateNamespace(t, allocator.NamespaceSpec{Name: "orders", Step: new(int64(100)), MaxStep: new(int64(1000))})

	store := testserver.OpenStore(t, "sqlite")
	release := testserver.HoldWorker(t, store, 0)
	defer release()
	unready := testserver.MustStart(t, testserver.Options{Store: store, NoWait: true,
		Keeper: allocator.KeeperSettings{WorkerIDs: &allocator.WorkerRange{Min: 0, Max: 0}}})

	// Bounds a hang only.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		url, path, secret string
		want              int
	}{
		{srv.URL, "/ids?count=2", caller, http.StatusOK},
		{srv.URL, "/ids?count=2&namespace=orders", caller, http.StatusOK},
		{srv.URL, "/ids?count=0", caller, http.StatusBadRequest},
		{srv.URL, fmt.Sprintf("/ids?count=%d", maxCount), greedy, http.StatusOK},
		{srv.URL, fmt.Sprintf("/ids?count=%d", maxCount), greedy, http.StatusTooManyRequests},
		{unready.URL, "/ids?count=1", "", http.StatusServiceUnavailable},
	} {
		if got, _ := httpGet(ctx, t, c.url+c.path, c.secret); got != c.want {
			t.Fatalf("GET %s: got status %d, want %d", c.path, got, c.want)
		}
	}

	// gRPC proper: HTTP/2 without TLS, as grpcurl -plaintext speaks it.
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	rpc := idgenv1connect.NewIdServiceClient(hc, srv.URL, connect.WithGRPC())
	nextIDs := func(rpc idgenv1connect.IdServiceClient, count int32) error {
		req := connect.NewRequest(&idgenv1.NextIdsRequest{Count: count})
		req.Header().Set("Authorization", "Bearer "+caller)
		_, err := rpc.NextIds(ctx, req)
		return err
	}
	if err := nextIDs(rpc, 2); err != nil {
		t.Fatalf("gRPC NextIds count 2: %v", err)
	}
	if err := nextIDs(rpc, 0); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("gRPC NextIds count 0: got %v, want invalid_argument", err)
	}
	if err := nextIDs(idgenv1connect.NewIdServiceClient(hc, unready.URL, connect.WithGRPC()), 1); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("gRPC NextIds on a node without a lease: got %v, want unavailable", err)
	}
	sreq := connect.NewRequest(&idgenv1.StreamIdsRequest{BatchSize: 2, Total: 4})
	sreq.Header().Set("Authorization", "Bearer "+caller)
	stream, err := rpc.StreamIds(ctx, sreq)
	if err != nil {
		t.Fatal(err)
	}
	messages := 0
	for stream.Receive() {
		messages++
	}
	if err := stream.Err(); err != nil || messages != 2 {
		t.Fatalf("gRPC StreamIds of 4 in batches of 2: got %d messages, error %v; want 2, none", messages, err)
	}
	_ = stream.Close()

	var out []string
	for _, u := range []string{srv.URL, unready.URL} {
		status, body := httpGet(ctx, t, u+"/metrics", "")
		if status != http.StatusOK {
			t.Fatalf("GET %s/metrics: status %d", u, status)
		}
		out = append(out, body)
	}
	return out
}

// httpGet returns the status and body of a GET of url, with a bearer
// token when secret is not empty.
func httpGet(ctx context.Context, t *testing.T, url, secret string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// A promSample is one line of the Prometheus text format: a series.
type promSample struct {
	Name   string
	Labels map[string]string
}

// parseExposition reads the Prometheus text format: the type of each
// family (# TYPE lines) and the name and labels of each sample.
func parseExposition(text string) (families map[string]string, samples []promSample, err error) {
	families = map[string]string{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = f[3]
		}
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSampleLine(line)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		samples = append(samples, s)
	}
	return families, samples, nil
}

func parseSampleLine(line string) (promSample, error) {
	end := strings.IndexAny(line, "{ ")
	if end <= 0 {
		return promSample{}, errors.New("no metric name")
	}
	s := promSample{Name: line[:end], Labels: map[string]string{}}
	rest := line[end:]
	if rest[0] != '{' {
		return s, nil
	}
	rest = rest[1:]
	for {
		rest = strings.TrimLeft(rest, " ,")
		if rest == "" {
			return s, errors.New("labels not closed")
		}
		if rest[0] == '}' {
			return s, nil
		}
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
			return s, errors.New("want name=\"value\"")
		}
		name := strings.TrimSpace(rest[:eq])
		var v strings.Builder
		i := eq + 2
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					v.WriteByte('\n')
					continue
				}
			}
			v.WriteByte(rest[i])
		}
		if i == len(rest) {
			return s, errors.New("label value not closed")
		}
		s.Labels[name] = v.String()
		rest = rest[i+1:]
	}
}

// seriesIndex is what /metrics exported, by sample name.
type seriesIndex struct {
	families map[string]string              // family → type
	byName   map[string][]map[string]string // sample name → label sets
}

// newSeriesIndex indexes the series of one or more nodes' /metrics.
func newSeriesIndex(t *testing.T, expositions ...string) seriesIndex {
	t.Helper()
	idx := seriesIndex{families: map[string]string{}, byName: map[string][]map[string]string{}}
	for _, e := range expositions {
		families, samples, err := parseExposition(e)
		if err != nil {
			t.Fatalf("/metrics: %v", err)
		}
		maps.Copy(idx.families, families)
		for _, s := range samples {
			idx.byName[s.Name] = append(idx.byName[s.Name], s.Labels)
		}
	}
	return idx
}

// family returns the family a sample name belongs to: a histogram's or a
// summary's _bucket, _sum and _count samples belong to it.
func (idx seriesIndex) family(name string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if typ := idx.families[base]; typ == "histogram" || typ == "summary" {
				return base
			}
		}
	}
	return name
}

// hasLabel reports whether some series of one of metrics has label.
func (idx seriesIndex) hasLabel(metrics []string, label string) bool {
	for _, m := range metrics {
		for _, ls := range idx.byName[m] {
			if _, ok := ls[label]; ok {
				return true
			}
		}
	}
	return false
}

// check returns what is wrong with q against the index: a metric with no
// series, a matcher on a label its series lack, an exact or regular
// expression value none of them has, a grouping label none of the grouped
// metrics has. Labels Prometheus's targets add (targetLabels) are allowed
// everywhere; values holding a Grafana variable ($…) are not checked.
func (idx seriesIndex) check(q promQuery) []string {
	var problems []string
	target := func(l string) bool { return slices.Contains(targetLabels, l) }
	for _, s := range q.Selectors {
		series := idx.byName[s.Metric]
		if len(series) == 0 {
			problems = append(problems, fmt.Sprintf("selects %s, which /metrics does not export", s.Metric))
			continue
		}
		for _, m := range s.Matchers {
			if m.Label == "__name__" {
				continue
			}
			if !idx.hasLabel([]string{s.Metric}, m.Label) {
				if !target(m.Label) {
					problems = append(problems, fmt.Sprintf("matches %s on label %s, which its series do not have", s.Metric, m.Label))
				}
				continue
			}
			if strings.Contains(m.Value, "$") {
				continue
			}
			match := func(v string) bool { return v == m.Value }
			if m.Op == "=~" || m.Op == "!~" {
				re, err := regexp.Compile("^(?:" + m.Value + ")$")
				if err != nil {
					problems = append(problems, fmt.Sprintf("matches %s on %s%s%q: %v", s.Metric, m.Label, m.Op, m.Value, err))
					continue
				}
				match = re.MatchString
			}
			if !slices.ContainsFunc(series, func(ls map[string]string) bool { return match(ls[m.Label]) }) {
				problems = append(problems, fmt.Sprintf("matches %s on %s%s%q: none of its series has such a value", s.Metric, m.Label, m.Op, m.Value))
			}
		}
	}
	for _, g := range q.Groupings {
		for _, l := range g.Labels {
			if !target(l) && !idx.hasLabel(g.Over, l) {
				problems = append(problems, fmt.Sprintf("%s (%s): label %s is on none of the series of %s", g.Clause, strings.Join(g.Labels, ", "), l, strings.Join(g.Over, ", ")))
			}
		}
	}
	return problems
}

// PromQL, as much of it as the check needs: the selectors of an
// expression, and the labels its by/without/on/ignoring/group_left/
// group_right clauses name, with the metrics each clause applies to.

type promMatcher struct{ Label, Op, Value string }

type promSelector struct {
	Metric   string
	Matchers []promMatcher
}

type promGrouping struct {
	Clause string   // by, without, on, ignoring, group_left, group_right
	Labels []string //
	Over   []string // the metrics of the expressions it applies to
}

type promQuery struct {
	Selectors []promSelector
	Groupings []promGrouping
}

type promTokenKind int

const (
	promEOF promTokenKind = iota
	promIdent
	promString
	promNumber // a number or a duration
	promRange  // [ … ], its content not read
	promPunct  // ( ) { } ,
	promOp     // operators, =, =~, !~, @
)

type promToken struct {
	kind promTokenKind
	text string // a string's value, unquoted
	pos  int
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || ('0' <= c && c <= '9') }

func lexPromQL(s string) ([]promToken, error) {
	var toks []promToken
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case isIdentStart(c):
			for i < len(s) && isIdentChar(s[i]) {
				i++
			}
			toks = append(toks, promToken{promIdent, s[start:i], start})
		case ('0' <= c && c <= '9') || (c == '.' && i+1 < len(s) && '0' <= s[i+1] && s[i+1] <= '9'):
			for i < len(s) {
				d := s[i]
				if isIdentChar(d) || d == '.' {
					i++
					continue
				}
				// The sign of an exponent: 1e+5, 2.5E-3.
				if (d == '+' || d == '-') && (s[i-1] == 'e' || s[i-1] == 'E') && i+1 < len(s) && '0' <= s[i+1] && s[i+1] <= '9' &&
					!strings.ContainsAny(s[start:i-1], "abcdfghijklmnopqrstuvwxyzABCDFGHIJKLMNOPQRSTUVWXYZ") {
					i++
					continue
				}
				break
			}
			toks = append(toks, promToken{promNumber, s[start:i], start})
		case c == '"' || c == '\'' || c == '`':
			var v strings.Builder
			i++
			for i < len(s) && s[i] != c {
				if s[i] == '\\' && c != '`' && i+1 < len(s) {
					i++
					switch s[i] {
					case 'n':
						v.WriteByte('\n')
					case 't':
						v.WriteByte('\t')
					default:
						v.WriteByte(s[i])
					}
					i++
					continue
				}
				v.WriteByte(s[i])
				i++
			}
			if i == len(s) {
				return nil, fmt.Errorf("string at %d not closed", start)
			}
			i++
			toks = append(toks, promToken{promString, v.String(), start})
		case c == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("range at %d not closed", start)
			}
			i += end + 1
			toks = append(toks, promToken{promRange, s[start+1 : i-1], start})
		case strings.IndexByte("(){},", c) >= 0:
			i++
			toks = append(toks, promToken{promPunct, s[start:i], start})
		default:
			op := ""
			for _, o := range []string{"==", "!=", "<=", ">=", "=~", "!~", "+", "-", "*", "/", "%", "^", "<", ">", "=", "@"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("unexpected %q at %d", c, start)
			}
			i += len(op)
			toks = append(toks, promToken{promOp, op, start})
		}
	}
	return append(toks, promToken{kind: promEOF, pos: len(s)}), nil
}

var (
	promAggregations = []string{"sum", "avg", "count", "min", "max", "group", "stddev", "stdvar",
		"topk", "bottomk", "quantile", "count_values", "limitk", "limit_ratio"}
	promPrecedence = map[string]int{
		"or": 1, "and": 2, "unless": 2,
		"==": 3, "!=": 3, "<=": 3, "<": 3, ">=": 3, ">": 3,
		"+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "atan2": 5, "^": 6,
	}
)

type promParser struct {
	toks []promToken
	i    int
	q    promQuery
}

// parsePromQL returns the selectors and grouping clauses of expr. It
// accepts Grafana's variables inside ranges ([$__rate_interval]) and
// strings ("$instance"), and nowhere else.
func parsePromQL(expr string) (promQuery, error) {
	toks, err := lexPromQL(expr)
	if err != nil {
		return promQuery{}, err
	}
	p := &promParser{toks: toks}
	if _, err := p.expr(1); err != nil {
		return promQuery{}, err
	}
	if t := p.peek(); t.kind != promEOF {
		return promQuery{}, fmt.Errorf("unexpected %q at %d", t.text, t.pos)
	}
	return p.q, nil
}

func (p *promParser) peek() promToken { return p.toks[p.i] }

func (p *promParser) next() promToken {
	t := p.toks[p.i]
	if t.kind != promEOF {
		p.i++
	}
	return t
}

func (p *promParser) is(kind promTokenKind, text string) bool {
	t := p.peek()
	return t.kind == kind && (kind == promIdent && strings.EqualFold(t.text, text) || t.text == text)
}

func (p *promParser) expect(kind promTokenKind, text string) error {
	if !p.is(kind, text) {
		t := p.peek()
		return fmt.Errorf("want %q at %d, got %q", text, t.pos, t.text)
	}
	p.next()
	return nil
}

// binaryOp returns the binary operator at the parser's position, if any.
func (p *promParser) binaryOp() (string, bool) {
	t := p.peek()
	op := t.text
	if t.kind == promIdent {
		op = strings.ToLower(op)
	} else if t.kind != promOp {
		return "", false
	}
	_, ok := promPrecedence[op]
	return op, ok
}

// metrics returns the metric names of the selectors sels indexes.
func (p *promParser) metrics(sels []int) []string {
	var out []string
	for _, i := range sels {
		if m := p.q.Selectors[i].Metric; !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// expr parses an expression whose binary operators bind at least as tightly
// as minPrec, and returns the indexes of its selectors.
func (p *promParser) expr(minPrec int) ([]int, error) {
	lhs, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		op, ok := p.binaryOp()
		if !ok || promPrecedence[op] < minPrec {
			return lhs, nil
		}
		p.next()
		if promPrecedence[op] == 3 && p.is(promIdent, "bool") {
			p.next()
		}
		var clauses []promGrouping
		for _, kw := range []string{"on", "ignoring", "group_left", "group_right"} {
			if !p.is(promIdent, kw) {
				continue
			}
			p.next()
			g := promGrouping{Clause: kw}
			if kw == "on" || kw == "ignoring" || p.is(promPunct, "(") {
				if g.Labels, err = p.labelList(); err != nil {
					return nil, err
				}
			}
			clauses = append(clauses, g)
		}
		next := promPrecedence[op] + 1
		if op == "^" { // right-associative
			next = promPrecedence[op]
		}
		rhs, err := p.expr(next)
		if err != nil {
			return nil, err
		}
		lhs = append(lhs, rhs...)
		for _, g := range clauses {
			g.Over = p.metrics(lhs)
			p.q.Groupings = append(p.q.Groupings, g)
		}
	}
}

func (p *promParser) unary() ([]int, error) {
	if p.is(promOp, "-") || p.is(promOp, "+") {
		p.next()
		return p.unary()
	}
	sels, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.peek().kind == promRange:
			p.next()
		case p.is(promIdent, "offset"):
			p.next()
			if p.is(promOp, "-") {
				p.next()
			}
			if t := p.next(); t.kind != promNumber {
				return nil, fmt.Errorf("want a duration after offset at %d", t.pos)
			}
		case p.is(promOp, "@"):
			p.next()
			if t := p.next(); t.kind == promIdent && (strings.EqualFold(t.text, "start") || strings.EqualFold(t.text, "end")) {
				if err := p.expect(promPunct, "("); err != nil {
					return nil, err
				}
				if err := p.expect(promPunct, ")"); err != nil {
					return nil, err
				}
			} else if t.kind != promNumber {
				return nil, fmt.Errorf("want a time after @ at %d", t.pos)
			}
		default:
			return sels, nil
		}
	}
}

func (p *promParser) primary() ([]int, error) {
	t := p.peek()
	switch {
	case t.kind == promPunct && t.text == "(":
		p.next()
		sels, err := p.expr(1)
		if err != nil {
			return nil, err
		}
		return sels, p.expect(promPunct, ")")
	case t.kind == promNumber || t.kind == promString:
		p.next()
		return nil, nil
	case t.kind == promPunct && t.text == "{":
		return p.selector("")
	case t.kind != promIdent:
		return nil, fmt.Errorf("unexpected %q at %d", t.text, t.pos)
	}
	p.next()
	name := strings.ToLower(t.text)
	isAgg := slices.Contains(promAggregations, name)
	switch {
	case isAgg && (p.is(promPunct, "(") || p.is(promIdent, "by") || p.is(promIdent, "without")):
		var clauses []promGrouping
		grouping := func() error {
			for _, kw := range []string{"by", "without"} {
				if p.is(promIdent, kw) {
					p.next()
					labels, err := p.labelList()
					clauses = append(clauses, promGrouping{Clause: kw, Labels: labels})
					return err
				}
			}
			return nil
		}
		if err := grouping(); err != nil {
			return nil, err
		}
		sels, err := p.args()
		if err != nil {
			return nil, err
		}
		if err := grouping(); err != nil {
			return nil, err
		}
		for _, g := range clauses {
			g.Over = p.metrics(sels)
			p.q.Groupings = append(p.q.Groupings, g)
		}
		return sels, nil
	case p.is(promPunct, "("):
		return p.args()
	case name == "inf" || name == "nan":
		return nil, nil
	}
	return p.selector(t.text)
}

// args parses a parenthesised, comma-separated argument list.
func (p *promParser) args() ([]int, error) {
	if err := p.expect(promPunct, "("); err != nil {
		return nil, err
	}
	var sels []int
	for !p.is(promPunct, ")") {
		s, err := p.expr(1)
		if err != nil {
			return nil, err
		}
		sels = append(sels, s...)
		if !p.is(promPunct, ",") {
			break
		}
		p.next()
	}
	return sels, p.expect(promPunct, ")")
}

// labelList parses ( label, … ).
func (p *promParser) labelList() ([]string, error) {
	if err := p.expect(promPunct, "("); err != nil {
		return nil, err
	}
	var labels []string
	for !p.is(promPunct, ")") {
		t := p.next()
		if t.kind != promIdent && t.kind != promString {
			return nil, fmt.Errorf("want a label name at %d, got %q", t.pos, t.text)
		}
		labels = append(labels, t.text)
		if !p.is(promPunct, ",") {
			break
		}
		p.next()
	}
	return labels, p.expect(promPunct, ")")
}

// selector parses a vector selector: the metric name read already (or ""),
// then its matchers in braces, if any.
func (p *promParser) selector(metric string) ([]int, error) {
	s := promSelector{Metric: metric}
	if p.is(promPunct, "{") {
		p.next()
		for !p.is(promPunct, "}") {
			l := p.next()
			if l.kind == promString && (p.is(promPunct, ",") || p.is(promPunct, "}")) {
				s.Metric = l.text // {"metric_name", …}
			} else {
				if l.kind != promIdent && l.kind != promString {
					return nil, fmt.Errorf("want a label name at %d, got %q", l.pos, l.text)
				}
				op := p.next()
				if op.kind != promOp || !slices.Contains([]string{"=", "!=", "=~", "!~"}, op.text) {
					return nil, fmt.Errorf("want a matcher operator at %d, got %q", op.pos, op.text)
				}
				v := p.next()
				if v.kind != promString {
					return nil, fmt.Errorf("want a quoted value at %d, got %q", v.pos, v.text)
				}
				if l.text == "__name__" && op.text == "=" {
					s.Metric = v.text
				}
				s.Matchers = append(s.Matchers, promMatcher{l.text, op.text, v.text})
			}
			if !p.is(promPunct, ",") {
				break
			}
			p.next()
		}
		if err := p.expect(promPunct, "}"); err != nil {
			return nil, err
		}
	}
	if s.Metric == "" {
		return nil, errors.New("a selector without a metric name")
	}
	p.q.Selectors = append(p.q.Selectors, s)
	return []int{len(p.q.Selectors) - 1}, nil
}

func TestParsePromQL(t *testing.T) {
	type sel = promSelector
	type m = promMatcher
	type g = promGrouping
	for _, c := range []struct {
		expr   string
		sels   []sel
		groups []g
	}{
		{"idgen_ready == 0", []sel{{"idgen_ready", nil}}, nil},
		{`sum by (pod) (rate(a_count{code="503"}[5m])) > 0.5`,
			[]sel{{"a_count", []m{{"code", "=", "503"}}}},
			[]g{{"by", []string{"pod"}, []string{"a_count"}}}},
		{`histogram_quantile(0.99, sum by (le, route) (rate(h_bucket{instance=~"$instance", route!="/metrics"}[$__rate_interval])))`,
			[]sel{{"h_bucket", []m{{"instance", "=~", "$instance"}, {"route", "!=", "/metrics"}}}},
			[]g{{"by", []string{"le", "route"}, []string{"h_bucket"}}}},
		{"sum(rate(a[5m])) without (x) / ignoring (y) group_left (z) b",
			[]sel{{"a", nil}, {"b", nil}},
			[]g{{"without", []string{"x"}, []string{"a"}}, {"ignoring", []string{"y"}, []string{"a", "b"}}, {"group_left", []string{"z"}, []string{"a", "b"}}}},
		{"max by (dc) (held / size) >= 0.8",
			[]sel{{"held", nil}, {"size", nil}},
			[]g{{"by", []string{"dc"}, []string{"held", "size"}}}},
		// Precedence: on() joins b and c only.
		{"a + b / on (i) c",
			[]sel{{"a", nil}, {"b", nil}, {"c", nil}},
			[]g{{"on", []string{"i"}, []string{"b", "c"}}}},
		{`(a{l="x, }y"} / 1000 - time()) and b == bool 1`,
			[]sel{{"a", []m{{"l", "=", "x, }y"}}}, {"b", nil}}, nil},
		{`{__name__="up", job!~'a|b'} offset -5m # comment
		  unless count_values("v", c) @ start()`,
			[]sel{{"up", []m{{"__name__", "=", "up"}, {"job", "!~", "a|b"}}}, {"c", nil}}, nil},
		{`-a ^ 2 ^ 1e+3 * rate(b[5m:1m] @ 1700000000) < Inf`, []sel{{"a", nil}, {"b", nil}}, nil},
		{`{"a.b", x="\"q\""}`, []sel{{"a.b", []m{{"x", "=", `"q"`}}}}, nil},
		{"topk(3, sum(a) by (x, y,))",
			[]sel{{"a", nil}},
			[]g{{"by", []string{"x", "y"}, []string{"a"}}}},
	} {
		q, err := parsePromQL(c.expr)
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		if fmt.Sprint(q.Selectors) != fmt.Sprint(c.sels) {
			t.Errorf("%q: got selectors %v, want %v", c.expr, q.Selectors, c.sels)
		}
		if fmt.Sprint(q.Groupings) != fmt.Sprint(c.groups) {
			t.Errorf("%q: got groupings %v, want %v", c.expr, q.Groupings, c.groups)
		}
	}
	for _, bad := range []string{
		"", "sum(a", `a{b="c"`, "a{b=c}", `a{b="c}`, "$x + a", "a b", "sum by (x (a)",
		`{job="x"}`, "a[5m", "a offset", "rate(a[5m]", "a +", "a{b}",
	} {
		if q, err := parsePromQL(bad); err == nil {
			t.Errorf("%q: got %+v, want an error", bad, q)
		}
	}
}

func TestParseExposition(t *testing.T) {
	text := `# HELP h A histogram.
# TYPE h histogram
h_bucket{route="/ids/:id",le="0.1"} 3
h_sum{route="/ids/:id"} 0.2
# TYPE c counter
c{a="x\"y\\z",b="line\nnext",} 1 1700000000000
up 1
`
	fams, samples, err := parseExposition(text)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"h": "histogram", "c": "counter"}; fmt.Sprint(fams) != fmt.Sprint(want) {
		t.Errorf("got families %v, want %v", fams, want)
	}
	want := []promSample{
		{"h_bucket", map[string]string{"route": "/ids/:id", "le": "0.1"}},
		{"h_sum", map[string]string{"route": "/ids/:id"}},
		{"c", map[string]string{"a": `x"y\z`, "b": "line\nnext"}},
		{"up", map[string]string{}},
	}
	if fmt.Sprint(samples) != fmt.Sprint(want) {
		t.Errorf("got samples %v, want %v", samples, want)
	}
	for _, bad := range []string{`x{a="b"`, `x{a=b} 1`, `{a="b"} 1`, `x{a="b} 1`} {
		if _, _, err := parseExposition(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// TestSeriesIndexCheck runs the check on a known exposition: each kind of
// mistake a query can make is reported, and a correct query passes.
func TestSeriesIndexCheck(t *testing.T) {
	idx := newSeriesIndex(t, `# TYPE req histogram
req_bucket{route="/ids",code="200",le="0.1"} 1
req_count{route="/ids",code="200"} 1
req_count{route="/ids",code="429"} 1
# TYPE runway gauge
runway{namespace="orders"} 5
`)
	for _, c := range []struct {
		expr string
		want []string // substrings of the problems, in order
	}{
		{`sum by (le, route, pod) (rate(req_bucket{instance=~"$instance", route="/ids"}[5m]))`, nil},
		{`sum by (code) (rate(req_count{code=~"4..|5.."}[5m]))`, nil},
		{`runway{namespace="orders"} / on (namespace) group_left runway`, nil},
		{`req_total`, []string{"selects req_total, which /metrics does not export"}},
		{`req_count{method="GET"}`, []string{"label method, which its series do not have"}},
		{`req_count{route="/idz"}`, []string{`route="/idz": none of its series`}},
		{`req_count{code=~"5.."}`, []string{`code=~"5..": none of its series`}},
		{`req_count{code!="503"}`, []string{`code!="503": none of its series`}},
		{`req_count{code=~"(4"}`, []string{"error parsing regexp"}},
		{`sum by (procedure) (req_count)`, []string{"label procedure is on none of the series of req_count"}},
		{`runway * on (route) req_count`, nil},
		{`runway * on (method) req_count`, []string{"label method is on none"}},
	} {
		q, err := parsePromQL(c.expr)
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		got := idx.check(q)
		if len(got) != len(c.want) {
			t.Errorf("%q: got problems %q, want %d matching %q", c.expr, got, len(c.want), c.want)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%q: got problem %q, want one with %q", c.expr, got[i], w)
			}
		}
	}
	if got, want := idx.family("req_bucket"), "req"; got != want {
		t.Errorf("family(req_bucket): got %s, want %s", got, want)
	}
	if got, want := idx.family("runway_count"), "runway_count"; got != want {
		t.Errorf("family(runway_count): got %s, want %s", got, want)
	}
}
