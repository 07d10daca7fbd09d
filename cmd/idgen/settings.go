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

	"go.yaml.in/yaml/v3"
)

// A setting comes from the command line, else the environment
// (IDGEN_LEASE_TTL), else the --config file (serve only), else the default.
// Serve's --help, docs/cli.md and --print-config are rendered from its
// definitions; other commands write --help by hand.

type source string

const (
	fromDefault source = ""
	fromFlag    source = "flag"
	fromEnv     source = "env"
	fromFile    source = "file"
)

// setting is one setting: flag --name, variable IDGEN_NAME, file key name.
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
}

// settings are a command's flags and settings in usage order.
type settings struct {
	cmd   string // for messages and --help: "serve", "namespaces create"
	list  []*setting
	group string // the group of the settings defined next
	fs    *flag.FlagSet
	// noEnv names the flags without a variable.
	noEnv map[string]bool
	// src says where each flag's value came from (after parse).
	src map[string]source
	// dsn is --dsn of an administrative command (newAdminFlags), else nil.
	dsn *string
}

func newSettings(cmd string) *settings {
	fs := flag.NewFlagSet("idgen "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors come back as a *usageError
	fs.Usage = func() {}
	return &settings{cmd: cmd, fs: fs, noEnv: map[string]bool{}, src: map[string]source{}}
}

// envName is the environment variable for flag name: IDGEN_LEASE_TTL for lease-ttl.
func envName(name string) string {
	return "IDGEN_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// add defines a setting for the flag name just defined on d.fs.
func (d *settings) add(name, arg, help string) *setting {
	fl := d.fs.Lookup(name)
	s := &setting{name: name, arg: arg, help: help, group: d.group, value: fl.Value, flagDefault: fl.DefValue}
	d.list = append(d.list, s)
	return s
}

// The definers below add one setting each; the setting's methods refine it.

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

func (s *setting) defaultText(t string) *setting { s.defText = t; return s }
func (s *setting) secretValue() *setting {
	return s.maskedBy(func(string) string { return redacted })
}
func (s *setting) maskedBy(f func(string) string) *setting { s.mask = f; return s }
func (s *setting) positiveValue() *setting                 { s.positive = true; return s }
func (s *setting) notInFile() *setting                     { s.noFile = true; return s }

func (d *settings) lookup(name string) *setting {
	for _, s := range d.list {
		if s.name == name {
			return s
		}
	}
	return nil
}

// parse sets flags from args (positionals may mix in; all after "--" are
// positional), then unset ones from the environment and the config file.
// It returns the positionals, or flag.ErrHelp after printing usage.
func (d *settings) parse(args []string, e env) ([]string, error) {
	var pos []string
	for {
		if err := d.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(e.stdout, usageOf(d.cmd))
				return nil, flag.ErrHelp
			}
			return nil, usagef(d.cmd, "%s", err)
		}
		rest := d.fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	d.fs.Visit(func(f *flag.Flag) { d.src[f.Name] = fromFlag })
	var err error
	d.fs.VisitAll(func(f *flag.Flag) {
		if err != nil || d.isSet(f.Name) || d.noEnv[f.Name] {
			return
		}
		if v := e.getenv(envName(f.Name)); v != "" {
			if err = f.Value.Set(v); err != nil {
				err = usagef(d.cmd, "invalid value for %s: %v", envName(f.Name), err)
			}
			d.src[f.Name] = fromEnv
		}
	})
	if err != nil {
		return nil, err
	}
	if c := d.lookup("config"); c != nil && c.value.String() != "" {
		if err := d.readFile(c.value.String()); err != nil {
			return nil, err
		}
	}
	return pos, nil
}

// isSet reports whether flag name was set anywhere (after parse).
func (d *settings) isSet(name string) bool { return d.src[name] != fromDefault }

// readFile sets unset settings from the YAML map at path.
func (d *settings) readFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return usagef(d.cmd, "cannot read the configuration file (--config, IDGEN_CONFIG): %v", err)
	}
	var doc yaml.Node
	if err = yaml.Unmarshal(data, &doc); err == nil && len(doc.Content) > 0 {
		err = d.setFromYAML("", doc.Content[0])
	}
	if err != nil {
		return usagef(d.cmd, "configuration file %s: %v", path, err)
	}
	return nil
}

// setFromYAML sets setting key from node n; nested keys join with dots
// (naming no setting). The value is the scalar as written.
func (d *settings) setFromYAML(key string, n *yaml.Node) error {
	switch {
	case n.Kind == yaml.AliasNode:
		return d.setFromYAML(key, n.Alias)
	case n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := d.setFromYAML(strings.TrimPrefix(key+"."+n.Content[i].Value, "."), n.Content[i+1]); err != nil {
				return err
			}
		}
		return nil
	case key == "":
		return errors.New("want a map of settings, such as lease-ttl: 1m")
	}
	s := d.lookup(key)
	if s == nil || s.noFile {
		return fmt.Errorf("unknown key %q", key)
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("invalid value for %s: want one value", key)
	}
	if d.isSet(key) {
		return nil // given on the command line or in the environment
	}
	v := n.Value
	if n.Tag == "!!null" {
		v = ""
	}
	if err := s.value.Set(v); err != nil {
		return fmt.Errorf("invalid value for %s: %w", key, err)
	}
	d.src[key] = fromFile
	return nil
}

// checkPositive refuses an explicit zero for a setting whose zero means
// the default: given, it is a mistake.
func (d *settings) checkPositive() error {
	for _, s := range d.list {
		if v := s.value.String(); s.positive && d.isSet(s.name) && (v == "0" || v == "0s") {
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

// flagsUsage renders --help's flags: each shown setting under its group,
// with its variable and default.
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

// plain drops the backquotes of `code` spans, for the terminal.
func plain(s string) string { return strings.ReplaceAll(s, "`", "") }

// wrap breaks text at spaces into lines of at most first, then width bytes.
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

// yamlValue writes v as a YAML scalar, quoted unless made of letters,
// digits and _./:+- and not starting with a colon.
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

// printConfig renders the settings in effect as a --config file, with
// sources and secrets masked; withTokens notes IDGEN_TOKENS.
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
		switch d.src[s.name] {
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
