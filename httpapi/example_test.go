package httpapi_test

import (
	"fmt"

	"github.com/idgen-project/idgen/httpapi"
)

// A tokens file names each caller, its scopes and the SHA-256 of its
// secret; idgen serve --tokens-file reads it, and the app hands the set to
// the server (Config.Tokens, Server.SetTokens).
func ExampleParseTokens() {
	file := "# callers\n" +
		"orders-api ids,leases " + httpapi.HashSecret("orders-secret") + "\n" +
		"ops        admin      " + httpapi.HashSecret("ops-secret") + "\n"
	set, err := httpapi.ParseTokens("tokens", []byte(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(set.Names(), set.Scopes())

	_, err = httpapi.ParseTokens("tokens", []byte("orders-api ids orders-secret\n"))
	fmt.Println(err)
	// Output:
	// [orders-api ops] ids,leases,admin
	// tokens:1: the third field is not a SHA-256 of 64 hex digits: write the hash of the secret (idgen tokens hash), never the secret
}

// RateLimit's Validate refuses settings out of range before a server is
// built; the zero value is no limit.
func ExampleRateLimit_Validate() {
	fmt.Println(httpapi.RateLimit{}.Validate())
	fmt.Println(httpapi.RateLimit{Rate: 50, Burst: 100}.Validate())
	fmt.Println(httpapi.RateLimit{Rate: 50, Burst: -1}.Validate())
	// Output:
	// <nil>
	// <nil>
	// burst -1: want 0 (the rate rounded up) or more
}
