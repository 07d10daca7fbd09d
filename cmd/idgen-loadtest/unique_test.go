package main

import "testing"

func TestUniqueness(t *testing.T) {
	tests := []struct {
		name         string
		batches      [][]int64 // IDs handed over by one connection each
		wantDistinct int64
		wantDups     int64
	}{
		{name: "interleaved connections", batches: [][]int64{{1, 3, 5}, {2, 4, 6}}, wantDistinct: 6},
		{name: "one repeated", batches: [][]int64{{1, 2, 3}, {3}}, wantDistinct: 3, wantDups: 1},
		{name: "thrice", batches: [][]int64{{9}, {9}, {9}}, wantDistinct: 1, wantDups: 2},
		{name: "within one response", batches: [][]int64{{4, 4}}, wantDistinct: 1, wantDups: 1},
		{name: "overlapping runs", batches: [][]int64{{10, 11, 12, 13, 14}, {12, 13, 14, 15}}, wantDistinct: 6, wantDups: 3},
		{name: "run inside a run", batches: [][]int64{{1, 2, 3, 4, 5, 6}, {3, 4}}, wantDistinct: 6, wantDups: 2},
		{name: "gaps", batches: [][]int64{{1, 100, 1 << 62}}, wantDistinct: 3},
		{name: "nothing", wantDistinct: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u uniqueness
			for _, b := range tt.batches {
				var rs runSet
				for _, id := range b {
					rs.add(id)
				}
				u.merge(&rs)
				if len(rs.runs) != 0 {
					t.Fatalf("merge left %d runs in the runSet, want it emptied", len(rs.runs))
				}
			}
			distinct, dups := u.finish()
			if distinct != tt.wantDistinct || dups != tt.wantDups {
				t.Errorf("finish() = %d distinct, %d dups; want %d, %d", distinct, dups, tt.wantDistinct, tt.wantDups)
			}
		})
	}
}

// TestUniquenessCompaction hands over enough runs to trigger compactions
// on the way and checks that duplicates are counted once each.
func TestUniquenessCompaction(t *testing.T) {
	u := uniqueness{minCompact: 1 << 12}
	var rs runSet
	const n = 3 << 12
	for i := range int64(n) {
		rs.add(2 * i) // every other ID: no two runs join
		if len(rs.runs) == 1000 {
			u.merge(&rs)
		}
	}
	rs.add(2 * 10) // one duplicate, late
	rs.add(2*10 + 1)
	u.merge(&rs)
	if u.compacted == 0 || u.compacted == len(u.runs) {
		t.Fatalf("compacted = %d of %d runs, want a compaction before finish and runs added since", u.compacted, len(u.runs))
	}
	distinct, dups := u.finish()
	if want := int64(n + 1); distinct != want {
		t.Errorf("distinct = %d, want %d", distinct, want)
	}
	if dups != 1 {
		t.Errorf("dups = %d, want 1", dups)
	}
}
