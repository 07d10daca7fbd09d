// Package bench holds benchmarks that compare idgen's Snowflake generator
// with github.com/bwmarrin/snowflake and github.com/sony/sonyflake/v2 in one
// run, on the same machine, reporting for each the wall time per ID, the CPU
// time per ID and the share of its own layout's cap that it reaches.
//
// It lives in a module of its own (see go.mod) so that idgen itself does not
// depend on the generators it is compared with. Run it from this directory:
//
//	go test -run '^$' -bench . -benchmem
//
// or with `make bench` from the repository root.
package bench
