// Package testkit is what idgen's tests share that does not depend on idgen
// itself: a database, an etcd cluster or a Chromium of a test's own, child
// processes, a fake clock and bounded waits. It imports no idgen package, so
// every package's own tests can use it; the fixtures that start a whole node
// or open a Store live in internal/testserver, which builds on this one.
//
// # Databases
//
// Postgres, MySQL and SQLite each return the DSN of a fresh, empty schema
// (PostgreSQL), database (MySQL/MariaDB) or file (SQLite) with a random name,
// dropped when the test ends, so tests never see each other's rows. The DSNs
// are in idgen's URL forms and can be given to the stores' Open functions:
//
//	postgres://user:pass@host:5432/db?sslmode=disable&search_path=<schema>
//	mysql://user:pass@host:3306/<database>
//	sqlite:<path in the test's temporary directory>
//
// The servers come from the environment, in this order:
//
//  1. IDGEN_TEST_POSTGRES_DSN and IDGEN_TEST_MYSQL_DSN, in the URL forms
//     above, name a server on which the user may create and drop schemas or
//     databases.
//  2. When one is not set and a Docker engine answers, the package starts a
//     container with testcontainers-go, once per test process and only when
//     a test first asks for it: the image IDGEN_TEST_POSTGRES_IMAGE
//     (default postgres:15) or IDGEN_TEST_MYSQL_IMAGE (default mysql:8; any
//     image that behaves as the official one for its environment variables
//     and log lines works, MariaDB's included). Its account has a random
//     password, fresh in every process: idgen masks its DSN's password
//     wherever it occurs in its output, so a password that is also a word
//     idgen prints would mask that word. testcontainers' reaper removes the
//     containers when the test run ends; where the reaper is turned off
//     (TESTCONTAINERS_RYUK_DISABLED=true), remove them by their label
//     org.testcontainers=true.
//  3. Otherwise the test is skipped with a message saying how to run it, or
//     fails when IDGEN_TEST_REQUIRE_DB=1 (as in CI), so that a missing
//     database can never pass for a green run.
//
// When IDGEN_TEST_DB_REPORT names a file, every skip, with why, and every
// container started is appended to it as a line (see [EnvReport]), so that
// a test runner can say at the end of a run how many database tests did
// not run and why (make test does).
package testkit
