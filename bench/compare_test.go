package bench

import (
	"errors"
	"fmt"
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake/v2"

	"github.com/idgen-project/idgen/snowflake"
)

// A generator under comparison: a name for the sub-benchmark, the most IDs
// its layout allows per time unit, and a constructor.
type impl struct {
	name string
	// capPerUnit IDs per unit of time at most: the sequence's range.
	capPerUnit float64
	unit       time.Duration
	// newGen builds one generator, shared by every goroutine of a
	// benchmark, and returns a constructor of one goroutine's op for
	// batches of the given size (it sets up its buffer before the clock
	// starts).
	newGen func(tb testing.TB) func(batch int) opFunc
	// batches reports whether batches of 1,000 are run on it.
	batches bool
}

// opFunc issues n IDs, checks that each is above the one before it issued
// (a benchmark of a broken generator is void) and returns how many it
// issued. One goroutine calls it; it keeps its own buffer and last ID.
type opFunc func(n int) (int, error)

// errOrder is returned by an opFunc that saw an ID not above the one before.
var errOrder = errors.New("ID not above the one before")

// capNS returns the wall time per ID at the generator's cap.
func (in impl) capNS() float64 { return float64(in.unit) / in.capPerUnit }

// impls lists the generators compared. idgen and bwmarrin/snowflake share the
// classic 41/10/12 layout (4,096 IDs per millisecond); Sonyflake has 8
// sequence bits per time unit, 10 ms by default (25,600 IDs/s) and 1 ms at
// its finest (256,000 IDs/s). A batch of 1,000 at Sonyflake's default unit
// takes 39 ms, so that one runs single IDs only.
func impls() []impl {
	return []impl{
		{name: "idgen", capPerUnit: 4096, unit: time.Millisecond, newGen: newIdgen, batches: true},
		{name: "bwmarrin", capPerUnit: 4096, unit: time.Millisecond, newGen: newBwmarrin, batches: true},
		{name: "sonyflake-1ms", capPerUnit: 256, unit: time.Millisecond, newGen: newSonyflake(time.Millisecond), batches: true},
		{name: "sonyflake-10ms", capPerUnit: 256, unit: 10 * time.Millisecond, newGen: newSonyflake(10 * time.Millisecond)},
	}
}

// newIdgen: Next for one ID, NextN for a batch (the IDs of a millisecond
// are reserved with one atomic operation).
func newIdgen(tb testing.TB) func(batch int) opFunc {
	g, err := snowflake.NewGenerator(snowflake.Settings{WorkerID: 1})
	if err != nil {
		tb.Fatalf("idgen NewGenerator: %v", err)
	}
	return func(batch int) opFunc {
		buf := make([]snowflake.ID, 0, batch)
		var prev snowflake.ID
		return func(n int) (int, error) {
			if n == 1 {
				id, err := g.Next()
				if err != nil {
					return 0, err
				}
				if id <= prev {
					return 0, errOrder
				}
				prev = id
				return 1, nil
			}
			var err error
			if buf, err = g.NextN(buf[:0], n); err != nil {
				return 0, err
			}
			for _, id := range buf {
				if id <= prev {
					return 0, errOrder
				}
				prev = id
			}
			return len(buf), nil
		}
	}
}

// newBwmarrin: no batch call, so a batch is n calls of Generate.
func newBwmarrin(tb testing.TB) func(batch int) opFunc {
	node, err := bwsnowflake.NewNode(1)
	if err != nil {
		tb.Fatalf("bwmarrin NewNode: %v", err)
	}
	return func(int) opFunc {
		var prev bwsnowflake.ID
		return func(n int) (int, error) {
			for range n {
				id := node.Generate()
				if id <= prev {
					return 0, errOrder
				}
				prev = id
			}
			return n, nil
		}
	}
}

// newSonyflake: no batch call, so a batch is n calls of NextID.
func newSonyflake(unit time.Duration) func(tb testing.TB) func(batch int) opFunc {
	return func(tb testing.TB) func(batch int) opFunc {
		sf, err := sonyflake.New(sonyflake.Settings{
			TimeUnit:  unit,
			MachineID: func() (int, error) { return 1, nil },
		})
		if err != nil {
			tb.Fatalf("sonyflake New: %v", err)
		}
		return func(int) opFunc {
			var prev int64
			return func(n int) (int, error) {
				for range n {
					id, err := sf.NextID()
					if err != nil {
						return 0, err
					}
					if id <= prev {
						return 0, errOrder
					}
					prev = id
				}
				return n, nil
			}
		}
	}
}

// BenchmarkNext issues one ID per op, from 1, 2, 16 and 64 goroutines
// sharing one generator, as the HTTP server does under GET /ids?count=1
// with many connections. ns/op is the wall time per ID.
func BenchmarkNext(b *testing.B) {
	for _, in := range impls() {
		for _, goroutines := range []int{1, 2, 16, 64} {
			b.Run(fmt.Sprintf("impl=%s/goroutines=%d", in.name, goroutines), func(b *testing.B) {
				measure(b, in, goroutines, 1)
			})
		}
	}
}

// BenchmarkBatch1000 issues batches of 1,000 IDs from 1, 4, 16 and 64
// goroutines sharing one generator, as the HTTP server does under
// GET /ids?count=1000 with many connections. One op is a batch; ns/id,
// CPU-ns/id and the shares are per ID. idgen uses NextN; the others have
// no batch call, so a batch is 1,000 calls.
func BenchmarkBatch1000(b *testing.B) {
	for _, in := range impls() {
		if !in.batches {
			continue
		}
		for _, goroutines := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("impl=%s/goroutines=%d", in.name, goroutines), func(b *testing.B) {
				measure(b, in, goroutines, 1000)
			})
		}
	}
}
