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
// start a graceful shutdown), SIGHUP (idgen serve reloads its tokens file),
// the arguments, the environment and the standard streams. Everything else
// is in run, which the tests call in-process.
func main() {
	setGCPercent(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runEnv(ctx, os.Args[1:], env{
		getenv: os.Getenv,
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		hangups: func(c chan<- os.Signal) func() {
			signal.Notify(c, syscall.SIGHUP)
			return func() { signal.Stop(c) }
		},
	})
	stop()
	os.Exit(exitCode(err, os.Stderr))
}
