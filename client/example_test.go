package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/idgen-project/idgen/client"
)

// A client with the default options: retries, circuit breaker, no cache.
func Example() {
	c, err := client.New("http://localhost:8080", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	id, err := c.Next(ctx)
	switch {
	case errors.Is(err, client.ErrUnavailable):
		log.Print("no idgen node can prove its lease right now; try later")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("order key:", id)
	}

	d, err := c.DrawNamespace(ctx, "invoices", 3)
	if errors.Is(err, client.ErrNotFound) {
		log.Fatal("create the namespace first: idgen namespaces create invoices")
	}
	if err == nil && d.Source == client.SourceSegment {
		fmt.Println("invoice numbers:", d.IDs, "ranges:", d.Ranges)
	}
}

// A client that fetches Snowflake IDs 1000 at a time and hands them out in
// process, for callers that need many IDs fast.
func ExampleOptions_cache() {
	c, err := client.New("http://idgen:8080", client.Options{
		Cache: client.CacheOptions{Snowflake: 1000, Namespaces: map[string]int{"orders": 100}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // stops background refills; cached IDs are dropped
}

// A generator that makes Snowflake IDs in this process under a worker lease
// held through the lease API: no request per ID.
func ExampleNewGenerator() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := client.NewGenerator(ctx, "http://idgen:8080", client.GeneratorOptions{
		Token:   "secret-of-a-token-with-the-leases-scope",
		Workers: &client.WorkerRange{Min: 16, Max: 31},
	})
	if err != nil {
		log.Fatal(err) // e.g. client.ErrForbidden: the token lacks the leases scope
	}
	defer g.Close(context.Background()) // releases the lease with the last timestamp used

	id, err := g.Next()
	switch {
	case errors.Is(err, client.ErrLeaseExpired):
		log.Print("the lease could not be renewed in time; retry soon")
	case errors.Is(err, client.ErrUnavailable):
		log.Print("no lease to issue under: ", err)
	case err == nil:
		fmt.Println("order key:", id)
	}
	ids, err := g.NextN(make([]int64, 0, 1000), 1000)
	if err == nil {
		fmt.Println(len(ids), "IDs")
	}
}

// Snowflake IDs with the fencing token of the lease that made them. A
// caller that keeps the last token per worker can tell a later holder of
// that worker ID (a greater fencing version) from a stale one.
func ExampleClient_DrawSnowflakes() {
	c, err := client.New("http://idgen:8080", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	d, err := c.DrawSnowflakes(context.Background(), 100)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range d.Leases {
		fmt.Printf("made by datacenter %d worker %d at fencing version %d\n", l.Datacenter, l.Worker, l.FencingVersion)
	}
}

// A strict namespace's answers carry a revision that grows with every
// fetch; the client refuses an answer whose revision does not.
func ExampleStaleRevisionError() {
	c, err := client.New("http://idgen:8080", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	d, err := c.DrawNamespace(context.Background(), "invoices", 1)
	var stale *client.StaleRevisionError
	switch {
	case errors.As(err, &stale):
		log.Printf("namespace %s: stale answer (revision %d, %d seen before); alert, and do not use it", stale.Namespace, stale.Got, stale.Previous)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("invoice number", d.IDs[0], "at revision", d.Revision)
	}
}
