package main

import (
	"cmp"
	"slices"
	"sync"
)

// An idRun is the IDs first..last, inclusive.
type idRun struct{ first, last int64 }

// runSet collects IDs as runs of consecutive values. Snowflake IDs of one
// millisecond and segment IDs are consecutive, so a run of a million IDs
// costs 16 bytes, and checking uniqueness across a whole load test fits in
// memory. A runSet belongs to one goroutine.
type runSet struct {
	runs []idRun
}

// add appends id, extending the last run when id follows it.
func (s *runSet) add(id int64) {
	if n := len(s.runs); n > 0 && s.runs[n-1].last+1 == id {
		s.runs[n-1].last = id
		return
	}
	s.runs = append(s.runs, idRun{id, id})
}

// addRun appends the IDs first..last (first <= last), extending the last
// run when they follow it.
func (s *runSet) addRun(first, last int64) {
	if n := len(s.runs); n > 0 && s.runs[n-1].last+1 == first {
		s.runs[n-1].last = last
		return
	}
	s.runs = append(s.runs, idRun{first, last})
}

// uniqueness is the set of every ID seen in a run of the tool, shared by the
// connections. Each connection collects its IDs in its own runSet and hands
// them over now and then (merge); uniqueness sorts them and joins runs that
// touch, counting every ID seen more than once as a duplicate.
type uniqueness struct {
	mu        sync.Mutex
	runs      []idRun
	compacted int   // len(runs) after the last compaction
	dups      int64 // IDs seen more than once, as of the last compaction
	// minCompact is how many runs it collects before its first compaction
	// (defaultMinCompact when 0); later ones wait until the set has doubled.
	minCompact int
}

const defaultMinCompact = 1 << 20

// merge takes the runs of s and empties s.
func (u *uniqueness) merge(s *runSet) {
	u.mu.Lock()
	u.runs = append(u.runs, s.runs...)
	threshold := u.minCompact
	if threshold == 0 {
		threshold = defaultMinCompact
	}
	if len(u.runs) >= max(2*u.compacted, threshold) {
		u.compactLocked()
	}
	u.mu.Unlock()
	s.runs = s.runs[:0]
}

// duplicates returns the duplicates found so far: exact once finish has run.
func (u *uniqueness) duplicates() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.dups
}

// finish compacts what is left and returns the number of distinct IDs and of
// duplicates (IDs seen more than once, counted once per extra sighting).
func (u *uniqueness) finish() (distinct, dups int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.compactLocked()
	for _, r := range u.runs {
		distinct += r.last - r.first + 1
	}
	return distinct, u.dups
}

// compactLocked sorts the runs, joins those that overlap or touch and counts
// the overlaps as duplicates.
func (u *uniqueness) compactLocked() {
	if len(u.runs) == 0 {
		return
	}
	slices.SortFunc(u.runs, func(a, b idRun) int { return cmp.Compare(a.first, b.first) })
	out := u.runs[:1]
	for _, r := range u.runs[1:] {
		cur := &out[len(out)-1]
		switch {
		case r.first > cur.last+1:
			out = append(out, r)
		case r.first == cur.last+1:
			cur.last = r.last
		default: // overlap: r.first ≤ cur.last
			u.dups += min(cur.last, r.last) - r.first + 1
			cur.last = max(cur.last, r.last)
		}
	}
	u.runs = out
	u.compacted = len(out)
}
