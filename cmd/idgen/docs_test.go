package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

//go:generate env IDGEN_UPDATE_DOCS=1 go test -run TestCLIDocs -count=1 .

// The flag tables of docs/cli.md are rendered from serve's flag
// definitions, the same ones --help is rendered from, between these
// markers.
const (
	docsBegin = "<!-- serve flags: rendered from cmd/idgen/serve.go by `go generate ./cmd/idgen`; do not edit -->\n"
	docsEnd   = "<!-- end of serve flags -->\n"
)

// TestCLIDocs fails when docs/cli.md's serve flag tables differ from the
// flag definitions; with IDGEN_UPDATE_DOCS=1 (go generate) it rewrites them.
func TestCLIDocs(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "cli.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, docsBegin), strings.Index(doc, docsEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/cli.md: got no %q … %q markers, want them around serve's flag tables", docsBegin, docsEnd)
	}
	got := doc[i+len(docsBegin) : j]
	want := "\n" + newServeFlags().f.markdown() + "\n"
	if got == want {
		return
	}
	if os.Getenv("IDGEN_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(doc[:i+len(docsBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote serve's flag tables in %s", path)
		return
	}
	t.Errorf("docs/cli.md: serve's flag tables differ from the flag definitions; run go generate ./cmd/idgen.\ngot:\n%s\nwant:\n%s", got, want)
}
