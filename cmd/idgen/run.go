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

// run is the whole program but the process: command args[0] with its
// arguments. Cancelling ctx shuts a server down; the error decides the
// exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runEnv(ctx, args, env{getenv: getenv, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr})
}

// runEnv is run with all the process gives (main adds stdin and SIGHUP).
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

// noArgs refuses positional arguments; takes says what cmd takes instead.
func noArgs(cmd string, pos []string, takes string) error {
	if len(pos) > 0 {
		return usagef(cmd, "unexpected argument %q (%s)", pos[0], takes)
	}
	return nil
}

// oneArg checks cmd got exactly one positional argument.
func oneArg(cmd string, pos []string, missing, takes string) error {
	switch {
	case len(pos) == 0:
		return usagef(cmd, "missing %s", missing)
	case len(pos) > 1:
		return usagef(cmd, "unexpected argument %q (%s)", pos[1], takes)
	}
	return nil
}

// subcommand is a command's subcommand and how it runs.
type subcommand struct {
	name string
	run  func(ctx context.Context, args []string, e env) error
}

func findSub(subs []subcommand, name string) (subcommand, bool) {
	for _, s := range subs {
		if s.name == name {
			return s, true
		}
	}
	return subcommand{}, false
}

// runSub runs the subcommand args[0] names, or cmd's --help; a missing or
// unknown one is a usage error listing subs.
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
	// hangups, when set, relays SIGHUP to c until stopped.
	hangups func(c chan<- os.Signal) (stop func())
	// hurry, when set, ends at a second SIGTERM or SIGINT.
	hurry context.Context
}

// usageError is a bad command line; it exits 2 with a hint to --help.
type usageError struct {
	cmd string // "serve", "namespaces create", or "" for idgen itself
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// exitCode writes err to stderr on one line and returns the exit code: 0
// (also --help), 2 for a usage error, else 1.
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
