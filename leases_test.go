package idgen_test

import (
	"strings"
	"testing"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
)

// TestLeaseAPIPools: the lease API's pool and the node's never overlap.
// One left out is the worker IDs outside the other (the larger side);
// neither leaves the lease API none; both overlapping, or the lease API's
// covering the layout, are refused.
func TestLeaseAPIPools(t *testing.T) {
	r := func(lo, hi int64) *allocator.WorkerRange { return &allocator.WorkerRange{Min: lo, Max: hi} }
	for _, tc := range []struct {
		name              string
		node, api         *allocator.WorkerRange
		wantNode, wantAPI *allocator.WorkerRange
		wantErr           string
	}{
		{"neither", nil, nil, nil, nil, ""},
		{"node low", r(0, 1), nil, r(0, 1), r(2, 31), ""},
		{"node high", r(16, 31), nil, r(16, 31), r(0, 15), ""},
		{"node in the middle, more above", r(2, 5), nil, r(2, 5), r(6, 31), ""},
		{"node in the middle, more below", r(20, 25), nil, r(20, 25), r(0, 19), ""},
		{"node everything", r(0, 31), nil, r(0, 31), nil, ""},
		{"api high", nil, r(16, 31), r(0, 15), r(16, 31), ""},
		{"api low", nil, r(0, 3), r(4, 31), r(0, 3), ""},
		{"both apart", r(0, 3), r(10, 20), r(0, 3), r(10, 20), ""},
		{"both overlapping", r(0, 10), r(10, 20), nil, nil, "invalid LeaseSettings.WorkerIDs 10-20: they overlap KeeperSettings.WorkerIDs 0-10"},
		{"api everything", nil, r(0, 31), nil, nil, "invalid LeaseSettings.WorkerIDs 0-31: they leave the node no worker ID"},
		{"api outside the layout", nil, r(30, 32), nil, nil, "invalid LeaseSettings.WorkerIDs 30-32: the layout allows 0 to 31"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks, err := allocator.KeeperSettings{WorkerIDs: tc.node}.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			l, ks, err := idgen.LeaseSettings{WorkerIDs: tc.api}.Resolve(ks)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !samePool(ks.WorkerIDs, tc.wantNode) || !samePool(l.WorkerIDs, tc.wantAPI) {
				t.Errorf("got node %v, lease API %v; want %v, %v", ks.WorkerIDs, l.WorkerIDs, tc.wantNode, tc.wantAPI)
			}
			// Resolving again changes nothing.
			l2, ks2, err := l.Resolve(ks)
			if err != nil || !samePool(ks2.WorkerIDs, ks.WorkerIDs) || !samePool(l2.WorkerIDs, l.WorkerIDs) {
				t.Errorf("resolved again: node %v, lease API %v, %v", ks2.WorkerIDs, l2.WorkerIDs, err)
			}
		})
	}
}

func samePool(a, b *allocator.WorkerRange) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
