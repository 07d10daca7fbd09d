package main

import (
	"context"
	"fmt"
	"strings"
)

// commands returns idgen's commands in --help order: the one definition
// from which --help, each command's usage and the docs' tables are
// rendered (TestCLIDocs checks; go generate ./cmd/idgen rewrites).
func commands() []command {
	return []command{
		{
			name: "serve", summary: "run the HTTP and gRPC service",
			forms: []form{
				{synopsis: "serve [flags]", summary: "run the HTTP and gRPC service"},
			},
			help: serveHelp, flags: func() *settings { return newServeFlags().f }, run: runServe,
		},
		{
			name: "migrate", summary: "apply, roll back or list the database migrations (up|down|status)",
			forms: []form{
				{synopsis: "migrate up|down|status [--dsn DSN]", summary: "apply, roll back or list the schema migrations"},
			},
			help: migrateHelp, run: runMigrate,
		},
		{
			name: "leases", summary: "print the worker lease table or its events, or evict a lease (list|events|evict)",
			forms: []form{
				{synopsis: "leases [--all] [--dsn DSN]", summary: "print the worker lease table (`idgen leases list` is the same)"},
				{synopsis: "leases events [flags]", summary: "print the lease events, the lease table's audit trail", help: leasesEventsHelp},
				{synopsis: "leases evict DC WORKER [--reason TEXT] [--fencing-version N] [--dsn DSN]", summary: "take a worker lease from its holder", help: leasesEvictHelp},
			},
			help: leasesHelp, run: runLeases,
		},
		{
			name: "namespaces", summary: "list, create, delete or import segment namespaces (list|create|delete|import)",
			forms: []form{
				{synopsis: "namespaces list [--dsn DSN]", summary: "list the segment namespaces"},
				{synopsis: "namespaces create NAME [flags]", summary: "create a segment namespace; `--start` is the first ID handed out"},
				{synopsis: "namespaces delete NAME [--dsn DSN]", summary: "delete a segment namespace (its counter stays, so a new one of that name starts above it)"},
				{synopsis: "namespaces import leaf|tinyid --from DSN [flags]", summary: "create namespaces from Leaf's `leaf_alloc` or tinyid's `tiny_id_info` rows, continuing above their `max_id`", help: importHelp},
			},
			help: namespacesHelp, run: runNamespaces,
		},
		{
			name: "sequences", summary: "list or create business-number sequences, read, export, void or prune in their ledger (list|create|ledger|export|void|prune)",
			forms: []form{
				{synopsis: "sequences list [--dsn DSN]", summary: "list the sequences with their current period, last number and open reservations"},
				{synopsis: "sequences create NAME --format F [flags]", summary: "create a sequence, e.g. `--format 'INV-{yyyy}-{seq:06}' --reset yearly --time-zone Europe/Berlin`"},
				{synopsis: "sequences ledger NAME [filters] [--limit N] [--after P/N] [--dsn DSN]", summary: "print a page of a sequence's ledger"},
				{synopsis: "sequences export NAME [filters] [--dsn DSN]", summary: "write a sequence's ledger as CSV to standard output"},
				{synopsis: "sequences void NAME RESERVATION --caller NAME [--dsn DSN]", summary: "void a reservation on behalf of the caller that made it"},
				{synopsis: "sequences prune NAME --before PERIOD [--dry-run] [--dsn DSN]", summary: "delete the ledger of the sequence's closed periods before PERIOD"},
			},
			help: sequencesHelp, run: runSequences,
		},
		{
			name: "audit", summary: "name the holder that issued a Snowflake ID (who)",
			forms: []form{
				{synopsis: "audit who ID [--layout T/D/W/S] [--epoch TIME] [--audit-sink DSN] [--dsn DSN]",
					summary: "name the holder, fencing version and lease window of the worker ID that issued ID, from the lease events (and ClickHouse)"},
			},
			help: auditHelp, run: runAudit,
		},
		{
			name: "restore-fence", summary: "fence a restored database before nodes start on it",
			forms: []form{
				{synopsis: "restore-fence [--gap N] [--up-to TIME] [--max-ttl D] [--reason TEXT] [--force] [--dsn DSN]",
					summary: "move every lease ceiling and namespace counter past what a restored (or lossy failed-over) database lost, before any node starts on it"},
			},
			help: restoreFenceHelp, run: runRestoreFence,
		},
		{
			name: "tokens", summary: "make the tokens of idgen's callers (hash|new)",
			forms: []form{
				{synopsis: "tokens hash", summary: "print the SHA-256 of a caller's secret, read from standard input"},
				{synopsis: "tokens new NAME SCOPES", summary: "make a caller's secret and its tokens file line"},
			},
			help: tokensHelp, run: runTokens,
		},
		{
			name: "parse", summary: "decompose a Snowflake ID",
			forms: []form{
				{synopsis: "parse ID [--layout T/D/W/S] [--epoch TIME] [--format FORMAT]", summary: "decompose a Snowflake ID given in any form (offline)"},
			},
			help: parseHelp, run: runParse,
		},
		{
			name: "compose", summary: "the smallest and largest Snowflake ID of a time",
			forms: []form{
				{synopsis: "compose --time TIME [--layout T/D/W/S] [--epoch TIME] [--format FORMAT]", summary: "the smallest and largest Snowflake ID of a millisecond, for key-range queries by time (offline)"},
			},
			help: composeHelp, run: runCompose,
		},
		{
			name: "version", summary: "print the version",
			forms: []form{
				{synopsis: "version", summary: "print the version"},
			},
			help: versionHelp, run: runVersion,
		},
	}
}

type command struct {
	name    string // "leases"
	summary string // its line in idgen --help
	forms   []form // its synopses: the Usage lines of its --help
	help    string // its --help below the Usage lines
	// flags, when set, returns the settings whose flags --help lists.
	flags func() *settings
	run   func(ctx context.Context, args []string, e env) error
}

// form is one way to call a command: a synopsis.
type form struct {
	synopsis string // after "idgen ": "leases evict DC WORKER [--reason TEXT] [--fencing-version N] [--dsn DSN]"
	summary  string // one line for the docs' command tables; `code` spans become code there
	help     string // the form's own --help below its Usage line; empty: the command's --help
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// intro is the command's --help down to its flags.
func (c command) intro() string {
	var b strings.Builder
	for i, f := range c.forms {
		lead := "       idgen "
		if i == 0 {
			lead = "Usage: idgen "
		}
		b.WriteString(lead + f.synopsis + "\n")
	}
	return b.String() + "\n" + c.help
}

// usage is the command's --help.
func (c command) usage() string {
	if c.flags != nil {
		return c.intro() + c.flags().flagsUsage()
	}
	return c.intro()
}

// sub is the subcommand a form names ("evict" of "leases evict …"), or "".
func (f form) sub() string {
	w := strings.Fields(f.synopsis)
	if len(w) < 2 || strings.Trim(w[1], "abcdefghijklmnopqrstuvwxyz") != "" {
		return ""
	}
	return w[1]
}

// usageOf returns the --help of cmd as commands name themselves ("leases
// evict"): the form's own if it has one, else its command's.
func usageOf(cmd string) string {
	name, sub, _ := strings.Cut(cmd, " ")
	c, ok := lookup(name)
	if !ok {
		panic("usageOf: no command " + name)
	}
	for _, f := range c.forms {
		if sub != "" && f.sub() == sub && f.help != "" {
			return "Usage: idgen " + f.synopsis + "\n\n" + f.help
		}
	}
	return c.usage()
}

// mainUsage is idgen --help.
func mainUsage() string {
	// The summaries start two spaces after the longest command name.
	const width = 80
	col := 0
	for _, c := range commands() {
		col = max(col, 2+len(c.name)+2)
	}
	var b strings.Builder
	b.WriteString(mainIntro + "\nCommands:\n")
	for _, c := range commands() {
		lines := wrap(c.summary, width-col, width-col)
		fmt.Fprintf(&b, "  %-*s%s\n", col-2, c.name, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "%*s%s\n", col, "", l)
		}
	}
	return b.String() + "\n" + mainOutro
}

const mainIntro = `Usage: idgen <command> [arguments]

idgen hands out unique 64-bit IDs: time-sortable Snowflake IDs whose worker ID
is leased from a database, and dense sequential IDs per namespace.
`

const mainOutro = `Every flag can also be set with an environment variable: --lease-ttl is
IDGEN_LEASE_TTL. A flag beats its variable, which beats the default;
idgen serve also reads a YAML file (--config), which both beat.

Run 'idgen <command> --help' for a command's flags.
`
