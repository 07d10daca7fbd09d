// Package nodestate keeps a node's state file: its allocator.NodeMark of
// the store, which lets a node tell at start that the store went back in
// time (a restore or lossy failover) without a restore fence.
//
// The file lives on the node's disk, never in the store, so a restore
// cannot take it back. Wrap keeps it current: after a claim, heartbeat or
// fetch it raises its values to what the store committed; before a release
// or tail return it lowers its own first, so the file never holds more than
// the store unless the store lost commits.
package nodestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// formatVersion is the version of the file's format.
const formatVersion = 1

// fileData is the file's JSON.
type fileData struct {
	Format     int              `json:"format"`
	StoreID    string           `json:"store_id"`
	Generation int64            `json:"generation"`
	Ceilings   map[string]int64 `json:"ceilings"` // "datacenter/worker": Unix ms
	Counters   map[string]int64 `json:"counters"` // namespace: max_id
}

// RaiseEvery is how often at most raised values are written (the rest wait
// for the next write or Flush); lowerings are written at once.
const RaiseEvery = time.Second

// File is a node's state file, safe for concurrent use, written atomically.
type File struct {
	path  string
	clock snowflake.Clock
	mu    sync.Mutex
	mark  allocator.NodeMark
	dirty bool      // raised values not written yet
	saved time.Time // the last write, by clock
}

// Open reads the state file at path (missing: an empty mark); clock (nil:
// the system's) paces raised writes.
func Open(path string, clock snowflake.Clock) (*File, error) {
	if clock == nil {
		clock = snowflake.SystemClock()
	}
	f := &File{path: path, clock: clock, mark: emptyMark("", 0)}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	var d fileData
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("state file %s: %w (remove it to start without a restore check)", path, err)
	}
	if d.Format != formatVersion {
		return nil, fmt.Errorf("state file %s: format %d, want %d", path, d.Format, formatVersion)
	}
	f.mark = emptyMark(d.StoreID, d.Generation)
	for k, v := range d.Ceilings {
		key, ok := parseKey(k)
		if !ok {
			return nil, fmt.Errorf("state file %s: bad worker %q (want datacenter/worker)", path, k)
		}
		f.mark.Ceilings[key] = v
	}
	maps.Copy(f.mark.Counters, d.Counters)
	return f, nil
}

func emptyMark(storeID string, generation int64) allocator.NodeMark {
	return allocator.NodeMark{StoreID: storeID, Generation: generation,
		Ceilings: map[allocator.LeaseKey]int64{}, Counters: map[string]int64{}}
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Mark returns a copy of the mark the file holds.
func (f *File) Mark() allocator.NodeMark {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := emptyMark(f.mark.StoreID, f.mark.Generation)
	maps.Copy(m.Ceilings, f.mark.Ceilings)
	maps.Copy(m.Counters, f.mark.Counters)
	return m
}

// Start checks the store's mark s (allocator.NodeMark.Check): a store that
// went back wraps allocator.ErrStoreBehind, the file untouched. Otherwise
// the file takes the store's identity and generation, dropping another
// store's mark first (fresh).
func (f *File) Start(s allocator.StoreMark) (fresh bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.mark.Check(s); err != nil {
		return false, err
	}
	if f.mark.StoreID != s.StoreID {
		fresh = f.mark.StoreID != "" || len(f.mark.Ceilings) > 0 || len(f.mark.Counters) > 0
		f.mark = emptyMark(s.StoreID, s.Generation)
	}
	f.mark.Generation = s.Generation
	return fresh, f.save()
}

// RaiseCeiling records key's committed ceiling unless the file's is higher.
func (f *File) RaiseCeiling(key allocator.LeaseKey, ceiling int64) error {
	return f.change(false, func(m *allocator.NodeMark) bool {
		if old, ok := m.Ceilings[key]; ok && old >= ceiling {
			return false
		}
		m.Ceilings[key] = ceiling
		return true
	})
}

// LowerCeiling records ceiling for key if below the file's.
func (f *File) LowerCeiling(key allocator.LeaseKey, ceiling int64) error {
	return f.change(true, func(m *allocator.NodeMark) bool {
		if old, ok := m.Ceilings[key]; !ok || old <= ceiling {
			return false
		}
		m.Ceilings[key] = ceiling
		return true
	})
}

// RaiseCounter records name's committed max_id unless the file's is higher.
func (f *File) RaiseCounter(name string, maxID int64) error {
	return f.change(false, func(m *allocator.NodeMark) bool {
		if old, ok := m.Counters[name]; ok && old >= maxID {
			return false
		}
		m.Counters[name] = maxID
		return true
	})
}

// LowerCounter records maxID for name if below the file's.
func (f *File) LowerCounter(name string, maxID int64) error {
	return f.change(true, func(m *allocator.NodeMark) bool {
		if old, ok := m.Counters[name]; !ok || old <= maxID {
			return false
		}
		m.Counters[name] = maxID
		return true
	})
}

// Flush writes raised values that are not written yet.
func (f *File) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dirty {
		return nil
	}
	return f.save()
}

// change applies fn to the mark. A lowering is written at once and undone
// in memory if the write fails (the caller must not lower the store then);
// a raise is written once RaiseEvery has passed.
func (f *File) change(lower bool, fn func(m *allocator.NodeMark) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var before allocator.NodeMark
	if lower {
		before = allocator.NodeMark{StoreID: f.mark.StoreID, Generation: f.mark.Generation,
			Ceilings: maps.Clone(f.mark.Ceilings), Counters: maps.Clone(f.mark.Counters)}
	}
	if !fn(&f.mark) {
		return nil
	}
	if !lower && f.clock.Now().Sub(f.saved) < RaiseEvery && f.clock.Now().Sub(f.saved) >= 0 {
		f.dirty = true
		return nil
	}
	if err := f.save(); err != nil {
		if lower {
			f.mark = before
		} else {
			f.dirty = true
		}
		return err
	}
	return nil
}

// save writes the mark atomically (rename, then directory sync).
func (f *File) save() error {
	d := fileData{Format: formatVersion, StoreID: f.mark.StoreID, Generation: f.mark.Generation,
		Ceilings: make(map[string]int64, len(f.mark.Ceilings)), Counters: f.mark.Counters}
	for k, v := range f.mark.Ceilings {
		d.Ceilings[formatKey(k)] = v
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	dir := filepath.Dir(f.path)
	tmp, err := os.CreateTemp(dir, filepath.Base(f.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("state file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: not every file system syncs a directory
		_ = d.Close()
	}
	f.dirty, f.saved = false, f.clock.Now()
	return nil
}

func formatKey(k allocator.LeaseKey) string {
	return strconv.FormatInt(k.DatacenterID, 10) + "/" + strconv.FormatInt(k.WorkerID, 10)
}

func parseKey(s string) (allocator.LeaseKey, bool) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return allocator.LeaseKey{}, false
	}
	dc, err1 := strconv.ParseInt(a, 10, 64)
	w, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || dc < 0 || w < 0 {
		return allocator.LeaseKey{}, false
	}
	return allocator.LeaseKey{DatacenterID: dc, WorkerID: w}, true
}
