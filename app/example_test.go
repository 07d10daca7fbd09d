package app_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/idgen-project/idgen/app"
)

// An idgen node on an SQLite file, serving on a port the system picks, as
// `idgen serve --dsn sqlite:… --listen 127.0.0.1:0` runs it.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "idgen-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	a, err := app.Open(ctx, app.Config{
		DSN:     "sqlite:" + filepath.Join(dir, "idgen.db"),
		Migrate: true,
		Listen:  "127.0.0.1:0",
	})
	if err != nil {
		log.Fatal(err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.Serve() }()

	resp, err := http.Get("http://" + a.Addr().String() + "/healthz")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)

	// Close finishes the requests in flight, returns segment tails,
	// releases the lease and closes the database; Serve then returns nil.
	if err := a.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-serveErr)
	// Output:
	// 200 OK
	// <nil>
}
