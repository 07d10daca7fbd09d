package bench

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// The targets idgen's generator is held to at its cap (docs/benchmarks.md):
// CPU time per ID at most a quarter of the wall time per ID, and at least
// 97% of the cap, for single IDs from 1, 2, 16 and 64 goroutines and for
// batches of 1,000 from 4, 16 and 64.
const (
	targetCPUPct = 25
	targetCapPct = 97
)

// targeted reports whether the targets apply to a benchmark.
func targeted(bench, impl string, goroutines int) bool {
	if impl != "idgen" {
		return false
	}
	switch bench {
	case "Next":
		return goroutines == 1 || goroutines == 2 || goroutines == 16 || goroutines == 64
	case "Batch1000":
		return goroutines == 4 || goroutines == 16 || goroutines == 64
	}
	return false
}

// minJudged is the shortest run whose figures are judged against the
// targets: shorter ones (-benchtime=1x) only show that the benchmark runs.
const minJudged = 500 * time.Millisecond

// machineBusy returns the CPU time all CPUs have spent busy since boot,
// from /proc/stat (in ticks of 10 ms), or false where it cannot be read.
// Less this process's CPU time it tells how much else ran during a
// benchmark: the machine may be shared.
func machineBusy() (time.Duration, bool) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		busy += v
	}
	return time.Duration(busy) * 10 * time.Millisecond, true
}

// row is what one benchmark run measured.
type row struct {
	bench, impl string
	goroutines  int
	n           int           // b.N
	ids         int64         // IDs issued
	elapsed     time.Duration // wall time
	cpu         time.Duration // this process's CPU time
	others      float64       // cores used by other processes, -1 unknown
	capNS       float64       // wall time per ID at the cap
}

func (r row) nsPerID() float64  { return float64(r.elapsed) / float64(r.ids) }
func (r row) cpuPerID() float64 { return float64(r.cpu) / float64(r.ids) }
func (r row) capPct() float64   { return 100 * r.capNS / r.nsPerID() }

// cpuPct is the CPU time per ID as a share of the wall time per ID: the
// cores the process kept busy, in percent of one.
func (r row) cpuPct() float64 { return 100 * float64(r.cpu) / float64(r.elapsed) }

// results collects the rows for the summary that TestMain prints.
var results struct {
	mu    sync.Mutex
	rows  map[string][]row // by sub-benchmark name, in run order
	names []string         // in the order they first ran
}

// record keeps r: a run with a larger b.N than the last one of the same
// name replaces it (the framework ramps b.N up within one -count), any
// other starts a new -count.
func record(name string, r row) {
	results.mu.Lock()
	defer results.mu.Unlock()
	if results.rows == nil {
		results.rows = map[string][]row{}
	}
	rs, seen := results.rows[name]
	if !seen {
		results.names = append(results.names, name)
	}
	if k := len(rs) - 1; k >= 0 && r.n > rs[k].n {
		rs[k] = r
	} else {
		rs = append(rs, r)
	}
	results.rows[name] = rs
}

// measure runs b.N ops of batch IDs each on one generator of in, shared by
// the given number of goroutines (exactly that many, whatever GOMAXPROCS
// is), and reports per ID: wall time (ns/id), CPU time (CPU-ns/id), the
// CPU time as a share of the wall time (CPU%wall), the share of the cap
// reached (%cap) and the cores other processes used meanwhile
// (other-cores).
func measure(b *testing.B, in impl, goroutines, batch int) {
	newOp := in.newGen(b)
	ops := make([]opFunc, goroutines)
	for i := range ops {
		ops[i] = newOp(batch)
	}
	// Goroutines claim ops in grains, so that sharing out b.N costs
	// little next to the op itself.
	grain := int64(max(1, 256/batch))
	var claimed, ids atomic.Int64
	var failed atomic.Value // error
	var wg sync.WaitGroup
	// The goroutines start before the clock and wait for go, so that
	// starting them is not measured.
	goC := make(chan struct{})
	for _, op := range ops {
		wg.Go(func() {
			var n int64
			defer func() { ids.Add(n) }()
			<-goC
			for failed.Load() == nil {
				first := claimed.Add(grain) - grain
				if first >= int64(b.N) {
					return
				}
				for range min(grain, int64(b.N)-first) {
					k, err := op(batch)
					if err != nil {
						failed.CompareAndSwap(nil, err)
						return
					}
					n += int64(k)
				}
			}
		})
	}
	busy0, busyOK := machineBusy() // it allocates: outside the timed part
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := testkit.ProcessCPU(b)
	start := time.Now()
	close(goC)
	wg.Wait()
	elapsed := time.Since(start)
	cpu := testkit.ProcessCPU(b) - cpu0
	b.StopTimer()
	busy1, busyOK1 := machineBusy()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("%s: %v", in.name, err)
	}
	r := row{impl: in.name, goroutines: goroutines, n: b.N, ids: ids.Load(), elapsed: elapsed, cpu: cpu, others: -1, capNS: in.capNS()}
	r.bench, _, _ = strings.Cut(strings.TrimPrefix(b.Name(), "Benchmark"), "/")
	if r.ids == 0 || elapsed <= 0 {
		return
	}
	if busyOK && busyOK1 {
		r.others = max(0, float64(busy1-busy0-cpu)/float64(elapsed))
	}
	b.ReportMetric(r.nsPerID(), "ns/id")
	b.ReportMetric(r.cpuPerID(), "CPU-ns/id")
	b.ReportMetric(r.cpuPct(), "CPU%wall")
	b.ReportMetric(r.capPct(), "%cap")
	if r.others >= 0 {
		b.ReportMetric(r.others, "other-cores")
	}
	record(b.Name(), r)
}

func TestMain(m *testing.M) {
	code := m.Run()
	printSummary(os.Stdout)
	os.Exit(code)
}

// printSummary prints one line per benchmark with the median of its
// -count runs: the figures docs/benchmarks.md publishes, and for idgen's
// targeted loads whether the targets were met.
func printSummary(w io.Writer) {
	results.mu.Lock()
	defer results.mu.Unlock()
	if len(results.rows) == 0 {
		return
	}
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	fmt.Fprintf(w, "\nSummary (median of each benchmark's runs; GOMAXPROCS=%d, %d CPUs, load average %s)\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), load)
	fmt.Fprintf(w, "Targets for idgen at the cap: CPU per ID <= %d%% of wall time per ID, >= %d%% of the cap.\n", targetCPUPct, targetCapPct)
	fmt.Fprintf(w, "| %-10s | %-14s | %10s | %4s | %10s | %7s | %11s | %9s | %11s | %-13s |\n",
		"benchmark", "impl", "goroutines", "runs", "ns/ID", "% cap", "CPU-ns/ID", "CPU%wall", "other cores", "target")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n",
		strings.Repeat("-", 12), strings.Repeat("-", 16), strings.Repeat("-", 11)+":", strings.Repeat("-", 5)+":",
		strings.Repeat("-", 11)+":", strings.Repeat("-", 8)+":", strings.Repeat("-", 12)+":",
		strings.Repeat("-", 10)+":", strings.Repeat("-", 12)+":", strings.Repeat("-", 15))
	for _, name := range results.names {
		rs := results.rows[name]
		r := rs[0]
		med := func(f func(row) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			slices.Sort(v)
			if len(v)%2 == 1 {
				return v[len(v)/2]
			}
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		capPct, cpuPct := med(row.capPct), med(row.cpuPct)
		verdict := "-"
		if targeted(r.bench, r.impl, r.goroutines) {
			shortest := slices.MinFunc(rs, func(a, b row) int { return cmp.Compare(a.elapsed, b.elapsed) })
			switch {
			case shortest.elapsed < minJudged:
				verdict = "run too short"
			case cpuPct <= targetCPUPct && capPct >= targetCapPct:
				verdict = "met"
			default:
				verdict = "MISSED"
			}
		}
		others := "?"
		if o := med(func(r row) float64 { return r.others }); o >= 0 && r.elapsed >= minJudged {
			others = fmt.Sprintf("%.2f", o)
		}
		fmt.Fprintf(w, "| %-10s | %-14s | %10d | %4d | %10.1f | %7.1f | %11.1f | %9.1f | %11s | %-13s |\n",
			r.bench, r.impl, r.goroutines, len(rs), med(row.nsPerID), capPct, med(row.cpuPerID), cpuPct, others, verdict)
	}
}
