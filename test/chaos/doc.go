// Package chaos is idgen's fault harness: it starts several real `idgen
// serve` processes against real PostgreSQL and MariaDB/MySQL servers, drives
// them with concurrent clients, injects faults (paused and killed processes,
// database black holes and latency through an in-process toxiproxy, clock
// jumps, database restarts, lost commit acknowledgements), records every ID
// of every successful response and checks them with a uniqueness oracle in
// the spirit of Jepsen's unique-ids checker.
//
// The oracle (oracle.go) is plain code with its own fast unit tests, which run
// with every `go test ./...`. The scenarios are behind the build tag `chaos`
// and need the databases named by IDGEN_TEST_POSTGRES_DSN and
// IDGEN_TEST_MYSQL_DSN:
//
//	make chaos
//	# which runs
//	go test -tags chaos -count=1 -v -timeout 25m ./test/chaos/
//
// The local generators' scenarios (TestChaosGenerators) run on SQLite too,
// the embedded default: the nodes of a scenario share one SQLite file in a
// temporary directory. That part needs no server:
//
//	go test -tags chaos -count=1 -v -run 'TestChaosGenerators/sqlite' ./test/chaos/
//
// TestChaos, several of whose scenarios proxy or restart the database
// server, runs on the two servers only.
//
// docs/reliability.md describes each scenario, what it proves, and the latest
// figures.
package chaos
