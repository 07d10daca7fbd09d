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
// start a graceful shutdown, a second one hurries it), SIGHUP (idgen serve
// reloads its tokens file), the arguments, the environment and the standard
// streams. Everything else is in run, which the tests call in-process.
func main() {
	setGCPercent(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	hurry, stopHurry := secondSignal(ctx)
	err := runEnv(ctx, os.Args[1:], env{
		getenv: os.Getenv,
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		hangups: func(c chan<- os.Signal) func() {
			signal.Notify(c, syscall.SIGHUP)
			return func() { signal.Stop(c) }
		},
		hurry: hurry,
	})
	stopHurry()
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// secondSignal returns a context that ends at a SIGINT or SIGTERM coming
// after ctx ended (ctx being the one the first signal cancels), and the
// function that stops watching and waits for the watcher to return.
func secondSignal(ctx context.Context) (context.Context, func()) {
	hurry, cancel := context.WithCancel(context.Background())
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-quit:
			return
		case <-ctx.Done():
		}
		// main's context, cancelled already, would swallow the second
		// signal: it is caught here too.
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(c)
		select {
		case <-quit:
		case <-c:
			cancel()
		}
	}()
	return hurry, func() {
		close(quit)
		<-done
		cancel()
	}
}
