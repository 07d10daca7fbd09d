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
