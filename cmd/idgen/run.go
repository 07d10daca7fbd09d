package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// run is the whole program but for the process around it: the command
// args[0] with the arguments that follow, the environment read through
// getenv. Cancelling ctx shuts a running server down gracefully. The error
// decides the exit code (exitCode).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runEnv(ctx, args, env{getenv: getenv, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr})
}

// runEnv is run with the whole of what the process gives a command: main
// adds standard input and SIGHUP.
func runEnv(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		return usagef("", "no command given")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(rest) > 0 {
			if c, ok := lookup(rest[0]); ok {
				fmt.Fprint(e.stdout, c.usage())
				return nil
			}
			return usagef("", "unknown command %q", rest[0])
		}
		fmt.Fprint(e.stdout, mainUsage())
		return nil
	case "-version", "--version":
		name = "version"
	}
	c, ok := lookup(name)
	if !ok {
		if strings.HasPrefix(name, "-") {
			return usagef("", "unknown flag %s (flags go after the command)", name)
		}
		return usagef("", "unknown command %q", name)
	}
	return c.run(ctx, rest, e)
}

// noArgs refuses the positional arguments of cmd, which takes flags only;
// takes says what it takes instead: "list takes flags only".
func noArgs(cmd string, pos []string, takes string) error {
	if len(pos) > 0 {
		return usagef(cmd, "unexpected argument %q (%s)", pos[0], takes)
	}
	return nil
}

// oneArg checks that cmd got exactly one positional argument: missing names
// it ("namespace NAME"), takes says so ("create takes one NAME").
func oneArg(cmd string, pos []string, missing, takes string) error {
	switch {
	case len(pos) == 0:
		return usagef(cmd, "missing %s", missing)
	case len(pos) > 1:
		return usagef(cmd, "unexpected argument %q (%s)", pos[1], takes)
	}
	return nil
}

// subcommand is one subcommand of a command (idgen namespaces create): its
// name and how it runs, given the arguments after the name.
type subcommand struct {
	name string
	run  func(ctx context.Context, args []string, e env) error
}

// findSub returns the subcommand of subs called name.
func findSub(subs []subcommand, name string) (subcommand, bool) {
	for _, s := range subs {
		if s.name == name {
			return s, true
		}
	}
	return subcommand{}, false
}

// runSub runs the subcommand of cmd that args[0] names, one of subs, or
// prints the --help of cmd; a missing or unknown subcommand is a usage
// error listing subs.
func runSub(ctx context.Context, cmd string, args []string, e env, subs []subcommand) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(args) == 0 {
		return usagef(cmd, "want %s", want)
	}
	if s, ok := findSub(subs, args[0]); ok {
		return s.run(ctx, args[1:], e)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(e.stdout, usageOf(cmd))
		return nil
	}
	return usagef(cmd, "unknown %s command %q (want %s)", cmd, args[0], want)
}

// env is what every command gets from the process.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// hangups, when not nil, relays SIGHUP to c until the function it
	// returns is called: idgen serve reloads its tokens file on it. Nil
	// (in tests that do not send one) leaves SIGHUP alone.
	hangups func(c chan<- os.Signal) (stop func())
	// hurry, when not nil, ends at a SIGTERM or SIGINT that comes after
	// the one that cancelled the command's context: idgen serve ends its
	// drain window on it. Nil (in tests) leaves the window to run out.
	hurry context.Context
}

// usageError is a bad command line: a flag, argument or environment value
// idgen cannot use. It exits with code 2 and a hint to the command's help.
type usageError struct {
	cmd string // "serve", "namespaces create", or "" for idgen itself
	msg string
}

func (e *usageError) Error() string { return e.msg }

// usagef returns a *usageError for command cmd.
func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// exitCode writes err to stderr, as one line (and a hint for a usage error),
// and returns the process's exit code: 0 for success and --help, 2 for a
// usage error, 1 for any other error.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		cmd := "idgen"
		if ue.cmd != "" {
			cmd += " " + ue.cmd
		}
		fmt.Fprintf(stderr, "idgen: %s\nRun '%s --help' for usage.\n", oneLine(err.Error()), cmd)
		return 2
	}
	fmt.Fprintf(stderr, "idgen: %s\n", oneLine(err.Error()))
	return 1
}

// oneLine folds a multi-line message (errors.Join) onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
