package problem_test

import (
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen/internal/problem"
)

// A handler of the gRPC API refuses with the code of what went wrong; the
// caller reads the status code, the problem code and the delay back.
func ExampleConnectError() {
	err := problem.ConnectError(problem.Unavailable, "no worker lease: retry later", 1500*time.Millisecond)

	code, _ := problem.CodeOf(err)
	delay, _ := problem.RetryDelay(err)
	fmt.Println(connect.CodeOf(err), code, delay, err.Meta().Get("Retry-After"))
	// Output: unavailable unavailable 1.5s 2
}
