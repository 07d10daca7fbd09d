package audit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/audit"
)

// TestClickHouseSinkSecret: the password goes in the Authorization header
// only, and no name, error or log text of the sink holds it.
func TestClickHouseSinkSecret(t *testing.T) {
	const password = "s3cret-pass-word"
	var gotUser, gotPass, gotQuery, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUser, gotPass, _ = r.BasicAuth()
		gotQuery = r.URL.Query().Get("query")
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		if strings.HasPrefix(gotQuery, "INSERT") {
			http.Error(w, "Code: 516, e.displayText() = DB::Exception: idgen: Authentication failed: password "+password+" is incorrect", http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	dsn := "clickhouse://idgen:" + password + "@" + strings.TrimPrefix(srv.URL, "http://") + "/audit?table=trail"
	ch, err := audit.NewClickHouse(dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = ch.Write(context.Background(), []audit.Event{{ID: "e1", Kind: audit.KindAcquire, WorkerID: 3}})
	if err == nil {
		t.Fatal("Write: got nil, want the server's 401")
	}
	for what, text := range map[string]string{"String": ch.String(), "error": err.Error(), "redacted DSN": audit.RedactSink(dsn)} {
		if strings.Contains(text, password) {
			t.Errorf("%s holds the password: %q", what, text)
		}
	}
	if gotUser != "idgen" || gotPass != password || !strings.HasPrefix(gotQuery, "INSERT INTO audit.trail FORMAT JSONEachRow") ||
		!strings.Contains(gotBody, `"event_id":"e1"`) {
		t.Errorf("request: user %q password %q query %q body %q; want basic auth, the insert and the row", gotUser, gotPass, gotQuery, gotBody)
	}
	if ch.Table() != "audit.trail" {
		t.Errorf("Table: got %q, want audit.trail", ch.Table())
	}
}

func TestOpenSinkRefuses(t *testing.T) {
	for _, spec := range []string{"", "kafka://x", "file:", "clickhouse://u:pw123456@host/bad-name", "clickhouse://u:pw123456@host/db?user=x", "clickhouse:///db"} {
		_, err := audit.OpenSink(spec, io.Discard)
		if !errors.Is(err, audit.ErrInvalidSink) || strings.Contains(err.Error(), "pw123456") {
			t.Errorf("OpenSink(%q): got %v, want ErrInvalidSink without the password", spec, err)
		}
	}
}
