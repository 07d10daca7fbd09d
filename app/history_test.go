package app_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// TestHistoryOwned checks that Open starts the status page's history, on
// the configured clock, and that Close stops it first, before the parts it
// reads from.
func TestHistoryOwned(t *testing.T) {
	logs := &testserver.LogBuffer{}
	clock := snowflake.NewShiftedClock(nil, time.Hour)
	a, err := app.Open(context.Background(), app.Config{
		Store: testserver.OpenStore(t, "sqlite"), Listen: "127.0.0.1:0", Clock: clock,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Status().History()
	testkit.WaitFor(t, waitBound, "a history sample after Open", func() bool { return h.Len() > 0 })
	// The page's time is the configured clock's, an hour ahead.
	before := time.Now()
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	m := regexp.MustCompile(`page generated (\S+ \S+)`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("status page without its time:\n%s", rec.Body)
	}
	if gen, err := time.Parse("2006-01-02 15:04:05.000Z", m[1]); err != nil || gen.Sub(before) < 59*time.Minute {
		t.Errorf("status page generated %s (%v): want the configured clock's time, an hour ahead of %s", m[1], err, before.UTC())
	}

	if err := a.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	out, at := logs.String(), -1
	for _, step := range []string{`msg="http server stopped"`, `msg="history sampler stopped"`, `msg="segment allocator stopped"`, `msg="lease keeper stopped"`} {
		i := strings.Index(out, step)
		if i <= at {
			t.Fatalf("log line %s missing or out of order:\n%s", step, out)
		}
		at = i
	}
}
