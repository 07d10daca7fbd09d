// Package bench holds benchmarks that compare idgen's Snowflake generator
// with github.com/bwmarrin/snowflake and github.com/sony/sonyflake/v2 in one
// run, on the same machine, at each generator's cap: single IDs from 1, 2,
// 16 and 64 goroutines (BenchmarkNext) and batches of 1,000 from 1, 4, 16
// and 64 goroutines (BenchmarkBatch1000), every goroutine drawing from one
// shared generator.
//
// For each it reports, per ID: the wall time (ns/id), the process's CPU time
// from getrusage(2), all threads included (CPU-ns/id), that CPU time as a
// share of the wall time (CPU%wall: 25 means a quarter of one core busy),
// the share of the generator's own cap reached (%cap) and the cores other
// processes used meanwhile, from /proc/stat (other-cores: anything above
// zero means the figures were taken on a busy machine). After the run it
// prints a summary table, the median of each benchmark's -count runs, with
// a verdict on idgen's targets: CPU%wall at most 25 and %cap at least 97
// for single IDs from 1, 2, 16 and 64 goroutines and for batches from 4,
// 16 and 64.
//
// It lives in a module of its own (see go.mod) so that idgen itself does not
// depend on the generators it is compared with. Run it from this directory:
//
//	go test -run '^$' -bench . -count 3 .
//
// or with `make bench` from the repository root.
//
// The command in keybench/ is of another kind: it inserts rows into
// PostgreSQL keyed by idgen's IDs, by UUIDv4 and by UUIDv7 and compares
// rows/s, index size and WAL (docs/benchmarks.md, "Why Snowflake keys").
package bench
