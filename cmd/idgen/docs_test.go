package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

//go:generate env IDGEN_UPDATE_DOCS=1 go test -run TestCLIDocs -count=1 .

// Parts of docs/cli.md and README.md are rendered from the definitions
// --help is rendered from, each between a pair of marker comments: serve's
// flag tables from its settings (serve.go), the command table and each
// command's synopsis from the command list (commands.go).
const (
	docsBegin = "<!-- serve flags: rendered from cmd/idgen/serve.go by `go generate ./cmd/idgen`; do not edit -->\n"
	docsEnd   = "<!-- end of serve flags -->\n"

	commandsBegin = "<!-- commands: rendered from cmd/idgen/commands.go by `go generate ./cmd/idgen`; do not edit -->\n"
	commandsEnd   = "<!-- end of commands -->\n"

	// synopsisBegin and synopsisEnd take a command as its messages name it:
	// "leases evict".
	synopsisBegin = "<!-- synopsis of idgen %s: rendered from cmd/idgen/commands.go by `go generate ./cmd/idgen`; do not edit -->\n"
	synopsisEnd   = "<!-- end of the synopsis of idgen %s -->\n"
)

// region is a rendered part of a document: the text between begin and
// end, which the code renders as want.
type region struct {
	what       string // for messages: "serve's flag tables"
	begin, end string
	want       string
}

// TestCLIDocs fails when a rendered part of docs/cli.md or README.md
// differs from what the code renders; with IDGEN_UPDATE_DOCS=1 (go
// generate) it rewrites them.
func TestCLIDocs(t *testing.T) {
	cli := []region{
		{"serve's flag tables", docsBegin, docsEnd, "\n" + newServeFlags().f.markdown() + "\n"},
		{"the command table", commandsBegin, commandsEnd, "\n" + commandsMarkdown("") + "\n"},
	}
	keys := map[string]bool{}
	for _, c := range commands() {
		for _, f := range c.forms {
			key := c.name
			if s := f.sub(); s != "" {
				key += " " + s
			}
			if keys[key] {
				t.Errorf("two forms of idgen %s", key)
			}
			keys[key] = true
			cli = append(cli, region{"the synopsis of idgen " + key,
				fmt.Sprintf(synopsisBegin, key), fmt.Sprintf(synopsisEnd, key), "\n" + formMarkdown(f) + "\n"})
		}
	}
	cliPath := filepath.Join("..", "..", "docs", "cli.md")
	checkRegions(t, cliPath, cli)

	// A synopsis of a command that is no more.
	b, err := os.ReadFile(cliPath)
	if err != nil {
		t.Fatal(err)
	}
	prefix, _, _ := strings.Cut(synopsisBegin, "%s")
	for _, part := range strings.Split(string(b), prefix)[1:] {
		if key, _, _ := strings.Cut(part, ":"); !keys[key] {
			t.Errorf("docs/cli.md: a synopsis of idgen %s, which is no form of a command in commands.go: remove its section", key)
		}
	}

	checkRegions(t, filepath.Join("..", "..", "README.md"), []region{
		{"the command table", commandsBegin, commandsEnd, "\n" + commandsMarkdown("docs/cli.md") + "\n"},
	})
}

// checkRegions fails when a region of the document at path differs from
// what the code renders, or rewrites the document with IDGEN_UPDATE_DOCS=1.
func checkRegions(t *testing.T, path string, regions []region) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	update := os.Getenv("IDGEN_UPDATE_DOCS") == "1"
	changed := false
	for _, r := range regions {
		i := strings.Index(doc, r.begin)
		j := strings.Index(doc, r.end)
		if i < 0 || j < i || strings.Count(doc, r.begin) != 1 || strings.Count(doc, r.end) != 1 {
			t.Errorf("%s: got no single pair of markers for %s; put\n%s%s\nwhere it belongs and run go generate ./cmd/idgen", path, r.what, r.begin, r.end)
			continue
		}
		got := doc[i+len(r.begin) : j]
		if got == r.want {
			continue
		}
		if update {
			doc = doc[:i+len(r.begin)] + r.want + doc[j:]
			changed = true
			t.Logf("rewrote %s in %s", r.what, path)
			continue
		}
		t.Errorf("%s: %s differs from the definitions; run go generate ./cmd/idgen.\ngot:\n%s\nwant:\n%s", path, r.what, got, r.want)
	}
	if changed {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// title is the form without its flags, "idgen namespaces import
// leaf|tinyid": the heading of its section of docs/cli.md.
func (f form) title() string {
	var w []string
	for _, s := range strings.Fields(f.synopsis) {
		if strings.HasPrefix(s, "[") || strings.HasPrefix(s, "-") {
			break
		}
		w = append(w, s)
	}
	return "idgen " + strings.Join(w, " ")
}

// commandsMarkdown renders the command table of docs/cli.md and README.md:
// a row per form, its synopsis linked to its section of docs/cli.md, at
// cliDoc ("" in docs/cli.md itself).
func commandsMarkdown(cliDoc string) string {
	var b strings.Builder
	b.WriteString("| command | what it does |\n|---|---|\n")
	for _, c := range commands() {
		for _, f := range c.forms {
			fmt.Fprintf(&b, "| [`idgen %s`](%s#%s) | %s |\n", cell(f.synopsis), cliDoc, slug(f.title()), cell(f.summary))
		}
	}
	return b.String()
}

// formMarkdown renders the start of a form's section of docs/cli.md: its
// title as the heading, then its synopsis.
func formMarkdown(f form) string {
	return "## " + f.title() + "\n\n```\nidgen " + f.synopsis + "\n```\n"
}

// cell escapes the pipes of s for a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// slug is the anchor GitHub gives the heading h: lower case, punctuation
// dropped, spaces turned into hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// markdown renders the settings as docs/cli.md lists them: a table per group.
func (d *settings) markdown() string {
	var b strings.Builder
	group := ""
	for _, s := range d.shown() {
		if s.group != group {
			if group != "" {
				b.WriteString("\n")
			}
			group = s.group
			fmt.Fprintf(&b, "**%s**\n\n| flag and file key | variable | default | meaning |\n|---|---|---|---|\n", group)
		}
		flagText := "--" + s.name
		if s.arg != "" {
			flagText += " " + s.arg
		}
		def := s.defaultOf()
		switch {
		case def == "":
			def = "none"
		case s.defText == "":
			def = "`" + def + "`"
		}
		key := "`" + s.name + "`"
		if s.noFile {
			key = "(not in the file)"
		}
		fmt.Fprintf(&b, "| `%s`<br>%s | `%s` | %s | %s |\n", flagText, key, envName(s.name), def, strings.ReplaceAll(s.help, "|", `\|`))
	}
	return b.String()
}
