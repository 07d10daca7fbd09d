package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/idgen-project/idgen/client"
)

// A client of three nodes with no balancer in front: it moves on to the
// next node when one does not answer or answers 503 (it is draining, or
// cannot prove its lease).
func ExampleNewFailover() {
	c, err := client.NewFailover([]string{"http://idgen-0:8080", "http://idgen-1:8080", "http://idgen-2:8080"}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	id, err := c.Next(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ID", id, "from", c.BaseURL())
}
