package audit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/testkit"
)

// A recorder sends to JSON lines. Of three reports of one holder within
// an interval, the first goes out at once and the other two add up to a
// second block record, sent at Close.
func ExampleRecorder() {
	clock := testkit.NewManual(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	rec, err := audit.New(audit.NewJSONSink(nopCloser{}, "example"), audit.RecorderSettings{Node: "node-a", Clock: clock})
	if err != nil {
		fmt.Println(err)
		return
	}
	rec.Start()
	key := allocator.LeaseKey{DatacenterID: 1, WorkerID: 7}
	for range 3 {
		rec.Block(audit.BlockReport{Holder: "node-a", LeaseKey: key, FencingVersion: 4,
			Block: allocator.Block{Count: 100, FromMS: 1795780800000, ToMS: 1795780800010}})
	}
	if err := rec.Close(context.Background()); err != nil {
		fmt.Println(err)
	}
	st := rec.Stats()
	fmt.Println("records sent:", st.Sent, "dropped:", st.Dropped)
	// Output:
	// records sent: 2 dropped: 0
}

// nopCloser discards what it is given: the example counts, it does not
// print the lines (their IDs and times differ at every run).
type nopCloser struct{}

func (nopCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopCloser) Close() error                { return nil }
