package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/idgen-project/idgen/client"
)

// An invoice number reserved, used and confirmed (docs/sequences.md).
func ExampleClient_Reserve() {
	c, err := client.New("http://localhost:8080", client.Options{Token: "billing-secret"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	r, err := c.Reserve(ctx, "invoices", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("invoice", r.Formatted[0], "until", r.ExpiresAt)
	// … issue the invoice, then:
	if _, err := c.Confirm(ctx, "invoices", r.ID); err != nil {
		log.Fatal(err) // the reservation expired or is not ours: the ledger says so
	}
}
