package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v4"
	"github.com/peterbourgon/ff/v4/ffyaml"
)

// A command's settings come from four places, the first that has one
// winning: the command line (--lease-ttl 1m), the environment
// (IDGEN_LEASE_TTL=1m), the configuration file named by --config or
// IDGEN_CONFIG (lease-ttl: 1m) and the default. Each setting is defined
// once, with its flag, and the usage text (--help), docs/cli.md's tables
// and --print-config are all rendered from those definitions.
//
// The flags are parsed by github.com/peterbourgon/ff/v4 and the file is
// read by its YAML parser. The environment is applied here rather than by
// ff, which reads os.Getenv: idgen's commands take their environment as a
// function, so that tests run in parallel with environments of their own.

// source says where a setting's value came from.
type source string

const (
	fromDefault source = ""
	fromFlag    source = "flag"
	fromEnv     source = "env"
	fromFile    source = "file"
)

// setting is one setting of a command: its flag --name, its environment
// variable IDGEN_NAME and its key name in the configuration file.
type setting struct {
	name  string // flag name and file key: "lease-ttl"
	arg   string // placeholder in the usage: "D"; empty for a boolean
	help  string // what it does; `code` spans become code in docs/cli.md
	group string // the heading it is listed under
	value flag.Value

	defText     string              // the default as the usage states it; empty: flagDefault
	flagDefault string              // the flag value's default, as a string
	mask        func(string) string // masks the value for --print-config; nil: no secret
	positive    bool                // zero given anywhere is refused: a zero means "the default" only when left out
	noFile      bool                // not a key of the configuration file (--config, --print-config)
	hidden      bool                // not in the usage, the docs nor --print-config, no variable and no key (the test clock)

	src source
}

// settings are a command's settings, in the order the usage lists them.
type settings struct {
	cmd   string // for messages and --help: "serve"
	list  []*setting
	group string // the group of the settings defined next
	// fs holds the flag values; ff parses the command line into it.
	fs *flag.FlagSet
	// noEnv names the hidden settings, which have no variable.
	noEnv map[string]bool
}

func newSettings(cmd string) *settings {
	fs := flag.NewFlagSet("idgen "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &settings{cmd: cmd, fs: fs, noEnv: map[string]bool{}}
}

// add defines a setting for the flag name just defined on d.fs.
func (d *settings) add(name, arg, help string) *setting {
	fl := d.fs.Lookup(name)
	s := &setting{name: name, arg: arg, help: help, group: d.group, value: fl.Value, flagDefault: fl.DefValue}
	d.list = append(d.list, s)
	return s
}

// The definers below add one setting each, of the type their name says.
// Each returns the setting, whose methods refine it: defaultText,
// secretValue or maskedBy, positiveValue, notInFile.

func (d *settings) String(p *string, name, arg, def, help string) *setting {
	d.fs.StringVar(p, name, def, "")
	return d.add(name, arg, help)
}

func (d *settings) Bool(p *bool, name string, def bool, help string) *setting {
	d.fs.BoolVar(p, name, def, "")
	return d.add(name, "", help)
}

func (d *settings) Int(p *int, name, arg string, def int, help string) *setting {
	d.fs.IntVar(p, name, def, "")
	return d.add(name, arg, help)
}

func (d *settings) Int64(p *int64, name, arg string, def int64, help string) *setting {
	d.fs.Int64Var(p, name, def, "")
	return d.add(name, arg, help)
}

func (d *settings) Float(p *float64, name, arg string, def float64, help string) *setting {
	d.fs.Float64Var(p, name, def, "")
	return d.add(name, arg, help)
}

func (d *settings) Duration(p *time.Duration, name, arg string, def time.Duration, help string) *setting {
	d.fs.DurationVar(p, name, def, "")
	return d.add(name, arg, help)
}

func (d *settings) Var(v flag.Value, name, arg, help string) *setting {
	d.fs.Var(v, name, "")
	return d.add(name, arg, help)
}

// Hidden defines a setting of the command line only, left out of the
// usage, the docs and --print-config, without a variable or a file key.
func (d *settings) Hidden(v flag.Value, name string) {
	d.fs.Var(v, name, "")
	d.list = append(d.list, &setting{name: name, value: v, hidden: true, noFile: true})
	d.noEnv[name] = true
}

func (s *setting) defaultText(t string) *setting { s.defText = t; return s }
func (s *setting) secretValue() *setting {
	return s.maskedBy(func(string) string { return redacted })
}
func (s *setting) maskedBy(f func(string) string) *setting { s.mask = f; return s }
func (s *setting) positiveValue() *setting                 { s.positive = true; return s }
func (s *setting) notInFile() *setting                     { s.noFile = true; return s }

// lookup returns the setting called name.
func (d *settings) lookup(name string) *setting {
	for _, s := range d.list {
		if s.name == name {
			return s
		}
	}
	return nil
}

// parse sets every setting from args, then the environment, then the file
// named by the setting "config" (when the command has one), each filling
// only what the one before left unset. It returns the positional
// arguments; on --help it writes usageOf(d.cmd) to e.stdout and returns
// flag.ErrHelp. Every bad value is a *usageError naming where it came from.
func (d *settings) parse(args []string, e env) ([]string, error) {
	ffs := ff.NewFlagSetFrom("idgen "+d.cmd, d.fs)
	if err := ffs.Parse(args); err != nil {
		switch {
		case errors.Is(err, ff.ErrHelp):
			fmt.Fprint(e.stdout, usageOf(d.cmd))
			return nil, flag.ErrHelp
		case errors.Is(err, ff.ErrUnknownFlag):
			// ff says `unknown flag "nope"`; the other commands, on the
			// standard flag package, say it this way.
			name, _ := strconv.Unquote(strings.TrimSpace(strings.TrimPrefix(err.Error(), ff.ErrUnknownFlag.Error())))
			return nil, usagef(d.cmd, "flag provided but not defined: -%s", name)
		}
		return nil, usagef(d.cmd, "invalid flag %v", err)
	}
	_ = ffs.WalkFlags(func(f ff.Flag) error {
		if name, _ := f.GetLongName(); f.IsSet() {
			d.lookup(name).src = fromFlag
		}
		return nil
	})
	for _, s := range d.list {
		if s.src != fromDefault || s.hidden {
			continue
		}
		v := e.getenv(envName(s.name))
		if v == "" {
			continue
		}
		if err := s.value.Set(v); err != nil {
			return nil, usagef(d.cmd, "invalid value for %s: %v", envName(s.name), err)
		}
		s.src = fromEnv
	}
	if c := d.lookup("config"); c != nil && c.value.String() != "" {
		if err := d.readFile(c.value.String()); err != nil {
			return nil, err
		}
	}
	return ffs.GetArgs(), nil
}

// readFile sets the settings still unset from the YAML file at path: a
// map of keys, the flags' names, to values.
func (d *settings) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return usagef(d.cmd, "cannot read the configuration file (--config, IDGEN_CONFIG): %v", err)
	}
	defer f.Close()
	err = ffyaml.Parse(f, func(key, value string) error {
		s := d.lookup(key)
		if s == nil || s.noFile {
			return fmt.Errorf("unknown key %q", key)
		}
		if s.src != fromDefault {
			return nil // given on the command line or in the environment
		}
		if err := s.value.Set(value); err != nil {
			return fmt.Errorf("invalid value for %s: %w", key, err)
		}
		s.src = fromFile
		return nil
	})
	if err != nil {
		return usagef(d.cmd, "configuration file %s: %v", path, err)
	}
	return nil
}

// checkPositive refuses a zero given for a setting whose zero means the
// default: given, a zero is a mistake (a ttl of 0 is no lease) and is
// refused rather than silently replaced.
func (d *settings) checkPositive() error {
	for _, s := range d.list {
		if v := s.value.String(); s.positive && s.src != fromDefault && (v == "0" || v == "0s") {
			return usagef(d.cmd, "invalid --%s %s (%s): want more than 0; leave it out for the default", s.name, v, envName(s.name))
		}
	}
	return nil
}

// shown returns the settings the usage and the docs list.
func (d *settings) shown() []*setting {
	var out []*setting
	for _, s := range d.list {
		if !s.hidden {
			out = append(out, s)
		}
	}
	return out
}

// defaultOf returns the default as the usage states it, or "" for none.
func (s *setting) defaultOf() string {
	if s.defText != "" {
		return s.defText
	}
	return s.flagDefault
}

// flagsUsage renders the flags of the command's --help, below its Usage
// lines and help text (command.usage): every shown setting under its
// group, with its variable and default.
func (d *settings) flagsUsage() string {
	const col, width = 28, 80
	var b strings.Builder
	b.WriteString("\nEvery flag is also an environment variable (in brackets) and, but for\n--config and --print-config, a key of the --config file. A flag beats its\nvariable, which beats the file, which beats the default.\n")
	group := ""
	for _, s := range d.shown() {
		if s.group != group {
			group = s.group
			fmt.Fprintf(&b, "\n%s:\n", group)
		}
		left := "  --" + s.name
		if s.arg != "" {
			left += " " + s.arg
		}
		text := plain(s.help) + " [" + envName(s.name) + "]"
		if def := s.defaultOf(); def != "" {
			text += " (default " + plain(def) + ")"
		}
		// A name too long for the column pushes its first line right.
		indent := max(col, len(left)+1)
		lines := wrap(text, width-indent, width-col)
		fmt.Fprintf(&b, "%-*s%s\n", indent, left, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "%*s%s\n", col, "", l)
		}
	}
	return b.String()
}

// markdown renders the settings as docs/cli.md lists them: a table per group.
func (d *settings) markdown() string {
	var b strings.Builder
	group := ""
	for _, s := range d.shown() {
		if s.group != group {
			if group != "" {
				b.WriteString("\n")
			}
			group = s.group
			fmt.Fprintf(&b, "**%s**\n\n| flag and file key | variable | default | meaning |\n|---|---|---|---|\n", group)
		}
		flagText := "--" + s.name
		if s.arg != "" {
			flagText += " " + s.arg
		}
		def := s.defaultOf()
		switch {
		case def == "":
			def = "none"
		case s.defText == "":
			def = "`" + def + "`"
		}
		key := "`" + s.name + "`"
		if s.noFile {
			key = "(not in the file)"
		}
		fmt.Fprintf(&b, "| `%s`<br>%s | `%s` | %s | %s |\n", flagText, key, envName(s.name), def, strings.ReplaceAll(s.help, "|", `\|`))
	}
	return b.String()
}

// plain drops the backquotes of `code` spans, for the terminal.
func plain(s string) string { return strings.ReplaceAll(s, "`", "") }

// wrap breaks text at spaces into a first line of at most first bytes and
// further lines of at most width bytes.
func wrap(text string, first, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		limit := width
		if len(lines) == 0 {
			limit = first
		}
		if line != "" && len(line)+1+len(w) > limit {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// yamlValue writes v as a YAML scalar that reads back as v: plain when it
// is made of letters, digits and _./:+- and does not start with a colon,
// quoted otherwise.
func yamlValue(v string) string {
	plain := v != "" && v[0] != ':'
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:+-", r)) {
			plain = false
		}
	}
	if plain {
		return v
	}
	return strconv.Quote(v)
}

// printConfig renders the settings in effect as a configuration file for
// --config, each with where its value came from, and the secrets masked.
// withTokens adds that IDGEN_TOKENS holds tokens.
func (d *settings) printConfig(withTokens bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# idgen %s: the configuration in effect. A flag beats its variable,\n# which beats this file, which beats the default. Secrets are masked.\n", d.cmd)
	for _, s := range d.shown() {
		if s.noFile {
			continue
		}
		v := s.value.String()
		if s.mask != nil && v != "" {
			v = s.mask(v)
		}
		from := "default"
		switch s.src {
		case fromFlag:
			from = "--" + s.name
		case fromEnv:
			from = envName(s.name)
		case fromFile:
			from = "file"
		}
		fmt.Fprintf(&b, "%s: %s  # %s\n", s.name, yamlValue(v), from)
	}
	if withTokens {
		fmt.Fprintf(&b, "# tokens: %s  # IDGEN_TOKENS (no key of the file)\n", redacted)
	}
	return b.String()
}
