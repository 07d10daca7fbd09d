#!/bin/sh
# Says at the end of `make test` what the database tests ran on. During the
# run internal/testdb appends a line to the file IDGEN_TEST_DB_REPORT names
# for every test it skips for want of a database server and for every
# container it starts; this prints one line for each kind, or nothing when
# the tests used the servers named by IDGEN_TEST_POSTGRES_DSN and
# IDGEN_TEST_MYSQL_DSN.
#
# Usage: scripts/testdb-report.sh FILE
set -eu
[ -s "$1" ] || exit 0
awk -F '\t' '
$1 == "skip" { skipped++; skips[$2]++ }
$1 == "container" { started++; images[$2 " (" $3 ")"]++ }
END {
	if (started) {
		line = ""
		for (i in images) line = line (line == "" ? "" : ", ") images[i] " x " i
		printf "testdb: %d database containers started for the tests, one per test process: %s\n", started, line
	}
	if (skipped) {
		printf "testdb: %d database tests SKIPPED (PostgreSQL %d, MySQL %d): no database server set and no Docker engine answering.\n", \
			skipped, skips["postgres"], skips["mysql"]
		printf "testdb: to run them, set IDGEN_TEST_POSTGRES_DSN and IDGEN_TEST_MYSQL_DSN or start Docker (docs/testing.md).\n"
	}
}' "$1"
