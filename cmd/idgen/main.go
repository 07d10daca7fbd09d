// Command idgen serves unique 64-bit IDs over HTTP and administers the
// database they are kept in. Run `idgen --help` for the commands, or see
// docs/cli.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// main only wires the process to run: the signal context (SIGINT and SIGTERM
// start a graceful shutdown), the arguments, the environment and the standard
// streams. Everything else is in run, which the tests call in-process.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}
