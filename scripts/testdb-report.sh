#!/bin/sh
# Says at the end of `make test` what the tests could not run on, and why.
# During the run the fixtures of internal/testkit (PostgreSQL and MySQL,
# etcd, Chromium) append a line to the file IDGEN_TEST_DB_REPORT names for
# every test they skip, with what was missing and why, and one for every
# database container they start (testkit.Report). This prints a line or two for
# each kind, or nothing when every test had what it needed from servers set
# in the environment.
#
# Usage: scripts/testdb-report.sh FILE
set -eu
[ -s "$1" ] || exit 0
awk -F '\t' '
# names returns the keys of the array a, joined by sep, sorted.
function names(a, sep,    out, k, n, i, j, t, keys) {
	n = 0
	for (k in a) keys[++n] = k
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && keys[j - 1] > keys[j]; j--) { t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t }
	out = ""
	for (i = 1; i <= n; i++) out = out (i > 1 ? sep : "") keys[i]
	return out
}
$1 == "container" { started++; images[$2 " (" $3 ")"]++ }
$1 == "skip" {
	why = ($4 == "" ? "no reason given" : $4)
	if ($2 == "postgres" || $2 == "mysql") {
		db++; dbs[$2]++; dbwhy[why] = 1
		if (why ~ /no Docker engine answering/) nodocker = 1
		else if (why ~ /Docker engine answered/) noimage = 1
	} else if ($2 == "etcd") {
		etcd++; etcdwhy[why] = 1
	} else if ($2 == "chromium") {
		chromium++; chromiumtests[$3] = 1
	} else {
		other++; otherwhat[$2] = 1
	}
}
END {
	if (started) {
		line = ""
		for (i in images) line = line (line == "" ? "" : ", ") images[i] " x " i
		printf "testdb: %d database containers started for the tests, one per test process: %s\n", started, line
	}
	if (db) {
		printf "testdb: %d database %s SKIPPED (PostgreSQL %d, MySQL %d): no database server set, and %s.\n", \
			db, (db == 1 ? "test" : "tests"), dbs["postgres"], dbs["mysql"], names(dbwhy, "; ")
		if (noimage)
			printf "testdb: to run them, make the images pullable, or build local ones and name them in IDGEN_TEST_POSTGRES_IMAGE and IDGEN_TEST_MYSQL_IMAGE, or set IDGEN_TEST_POSTGRES_DSN and IDGEN_TEST_MYSQL_DSN (docs/testing.md).\n"
		if (nodocker || !noimage)
			printf "testdb: to run them, set IDGEN_TEST_POSTGRES_DSN and IDGEN_TEST_MYSQL_DSN or start Docker (docs/testing.md).\n"
	}
	if (etcd)
		printf "etcdtest: %d etcd %s SKIPPED: %s. To run them, set IDGEN_TEST_ETCD_BIN or IDGEN_TEST_ETCD_DSN (docs/testing.md).\n", \
			etcd, (etcd == 1 ? "test" : "tests"), names(etcdwhy, "; ")
	if (chromium)
		printf "browsertest: %d browser %s SKIPPED (%s): no Chromium found. To run %s, apt-get install chromium or set IDGEN_CHROMIUM.\n", \
			chromium, (chromium == 1 ? "test" : "tests"), names(chromiumtests, ", "), (chromium == 1 ? "it" : "them")
	if (other)
		printf "tests: %d more SKIPPED for want of %s.\n", other, names(otherwhat, ", ")
}' "$1"
