// Command idgen serves unique 64-bit IDs over HTTP and administers their
// database. See `idgen --help` or docs/cli.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// main wires the process to run: signals (SIGINT/SIGTERM shut down, a
// second one hurries; SIGHUP reloads tokens), arguments, environment and
// streams.
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

// secondSignal returns a context ending at a SIGINT or SIGTERM after ctx
// ended, and a function that stops watching and waits.
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
		// main's context, already cancelled, would swallow it.
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
