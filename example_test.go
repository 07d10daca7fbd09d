package idgen_test

import (
	"fmt"

	"github.com/idgen-project/idgen"
)

// A tokens file names each caller, its scopes and the SHA-256 of its
// secret; idgen serve --tokens-file reads it, and the node's Authorizer
// decides with it (NewAuthorizer, Authorizer.SetTokens).
func ExampleParseTokens() {
	file := "# callers\n" +
		"orders-api ids,leases " + idgen.HashSecret("orders-secret") + "\n" +
		"ops        admin      " + idgen.HashSecret("ops-secret") + "\n"
	set, err := idgen.ParseTokens("tokens", []byte(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(set.Names(), set.Scopes())

	_, err = idgen.ParseTokens("tokens", []byte("orders-api ids orders-secret\n"))
	fmt.Println(err)
	// Output:
	// [orders-api ops] ids,leases,admin
	// tokens:1: the third field is not a SHA-256 of 64 hex digits: write the hash of the secret (idgen tokens hash), never the secret
}

// RateLimit's Validate refuses settings out of range for a node's largest
// count before a service is built; the zero value is no limit.
func ExampleRateLimit_Validate() {
	const maxCount = 1000
	fmt.Println(idgen.RateLimit{}.Validate(maxCount))
	fmt.Println(idgen.RateLimit{Rate: 5000, Burst: 10000}.Validate(maxCount))
	fmt.Println(idgen.RateLimit{Rate: 5000, Burst: 100}.Validate(maxCount))
	// Output:
	// <nil>
	// <nil>
	// invalid RateLimit.Burst 100: below the largest count 1000, a call of that count could never pass
}
