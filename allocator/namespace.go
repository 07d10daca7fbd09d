package allocator

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file holds namespaces: the segments row, its settings' rules, and
// the two segment store interfaces.

// Segment modes and fallbacks.
type (
	Mode     string
	Fallback string
)

const (
	ModeBuffered Mode = "buffered" // ranges are pre-fetched and double-buffered
	ModeStrict   Mode = "strict"   // IDs fetched when drawn, exactly N; concurrent draws on a node share a fetch

	FallbackNone      Fallback = "none"      // unavailable while the database is
	FallbackSnowflake Fallback = "snowflake" // Snowflake IDs while the database is unreachable
)

// Valid reports whether m is buffered or strict.
func (m Mode) Valid() bool { return m == ModeBuffered || m == ModeStrict }

// Valid reports whether f is none or snowflake.
func (f Fallback) Valid() bool { return f == FallbackNone || f == FallbackSnowflake }

// Rules of a namespace's settings.
const (
	// DefaultStep is the step of a namespace created without one.
	DefaultStep = 1000
	// MaxStepGrowth: max_step defaults to step × MaxStepGrowth.
	MaxStepGrowth = 100
	// MaxStepLimit is the largest step, min_step or max_step.
	MaxStepLimit = 1 << 30
	// MaxDescriptionLen is the longest description, in bytes of UTF-8.
	MaxDescriptionLen = 1024
	// MaxNameLen is the longest namespace name, in bytes.
	MaxNameLen = 64
)

// Namespace is one row of segments.
type Namespace struct {
	Name string
	// MaxID is the last slot handed out; the next range starts at MaxID+1.
	MaxID int64
	// MaxIDLimit is max_id's largest value, 0 for none. Set once, for good,
	// when the Snowflake fallback is turned on (FallbackLimit).
	MaxIDLimit  int64
	Step        int64
	MinStep     int64
	MaxStep     int64
	Mode        Mode
	Fallback    Fallback
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Description string
	// Stride (K ≥ 1) and Offset (0 ≤ R < K) interleave namespaces of one name
	// in separate databases: slot n is handed out as ID n×K + R
	// (docs/regions.md). Fixed at creation; defaults 1 and 0.
	Stride int64
	Offset int64
	// DeletedAt is the deletion time, zero when live. Only DeleteNamespace
	// returns a deleted namespace.
	DeletedAt time.Time
}

// Limit returns the largest value the counter may reach: MaxIDLimit or
// the largest int64, never above StrideCap.
func (ns Namespace) Limit() int64 {
	if ns.MaxIDLimit > 0 {
		return min(ns.MaxIDLimit, ns.StrideCap())
	}
	return ns.StrideCap()
}

// StrideCap returns the largest slot whose ID fits an int64.
func (ns Namespace) StrideCap() int64 {
	k, r := ns.Interleave()
	return (math.MaxInt64 - r) / k
}

// Interleave returns Stride (0 read as 1) and Offset.
func (ns Namespace) Interleave() (stride, offset int64) {
	if ns.Stride == 0 {
		return 1, ns.Offset
	}
	return ns.Stride, ns.Offset
}

// IDOf returns slot n's ID: n×Stride + Offset.
func (ns Namespace) IDOf(n int64) int64 {
	k, r := ns.Interleave()
	return n*k + r
}

// Remaining returns how many IDs the counter can still hand out.
func (ns Namespace) Remaining() int64 { return max(ns.Limit()-ns.MaxID, 0) }

// ExhaustedError is the error (wrapping ErrNamespaceExhausted) of a fetch
// of n IDs that ns cannot give. Stores return it from FetchSegment.
func (ns Namespace) ExhaustedError(n int64) error {
	if left := ns.Remaining(); left > 0 {
		return fmt.Errorf("%w: %d IDs left up to its limit %d, %d asked for", ErrNamespaceExhausted, left, ns.Limit(), n)
	}
	return fmt.Errorf("%w: every ID up to its limit %d has been handed out", ErrNamespaceExhausted, ns.Limit())
}

// FallbackLimit returns the MaxIDLimit that keeps the counter and the
// Snowflake fallback apart: one below smallest, the smallest Snowflake ID
// when the fallback is turned on. The store never moves max_id past it
// (a CHECK backs this) and the fallback never serves at or below it. It is
// never raised or removed, even when the fallback is turned off. With a
// stride the limit is a slot.
func FallbackLimit(smallest int64) int64 { return smallest - 1 }

// ValidNamespace checks a name against ^[a-z0-9][a-z0-9_.-]{0,63}$; the
// error wraps ErrInvalidNamespace.
func ValidNamespace(name string) error {
	if len(name) == 0 {
		return fmt.Errorf("%w: empty name", ErrInvalidNamespace)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: name is %d bytes long, at most %d allowed", ErrInvalidNamespace, len(name), MaxNameLen)
	}
	if c := name[0]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
		return fmt.Errorf("%w: name %q must start with a-z or 0-9", ErrInvalidNamespace, name)
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-' {
			continue
		}
		return fmt.Errorf("%w: name %q may hold only a-z, 0-9, '_', '.' and '-'", ErrInvalidNamespace, name)
	}
	return nil
}

// Problem is one namespace setting that breaks a rule.
type Problem struct {
	Setting string // name, start, step, min_step, max_step, mode, fallback, description, stride or offset
	Value   string // the value given, as Go would print it (text quoted)
	Want    string // what the rule allows
}

func (p Problem) String() string { return p.Setting + " " + p.Value + ": want " + p.Want }

// SettingsError lists the settings that break the rules; it wraps
// ErrInvalidNamespace.
type SettingsError struct {
	Problems []Problem
}

func (e *SettingsError) Error() string {
	texts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		texts[i] = p.String()
	}
	return ErrInvalidNamespace.Error() + ": " + strings.Join(texts, "; ")
}

func (e *SettingsError) Unwrap() error { return ErrInvalidNamespace }

type problems []Problem

func (ps *problems) add(setting, value, format string, args ...any) {
	*ps = append(*ps, Problem{Setting: setting, Value: value, Want: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &SettingsError{Problems: ps}
}

// checkSteps: 1 ≤ step ≤ MaxStepLimit, then 1 ≤ min_step ≤ step ≤
// max_step ≤ MaxStepLimit.
func (ps *problems) checkSteps(step, minStep, maxStep int64) {
	if step < 1 || step > MaxStepLimit {
		ps.add("step", itoa(step), "1 to %d", MaxStepLimit)
		return // min_step and max_step are judged against a valid step
	}
	if minStep < 1 || minStep > step {
		ps.add("min_step", itoa(minStep), "1 to the step, %d", step)
	}
	if maxStep < step || maxStep > MaxStepLimit {
		ps.add("max_step", itoa(maxStep), "the step, %d, to %d", step, MaxStepLimit)
	}
}

func (ps *problems) checkMode(m Mode) {
	if !m.Valid() {
		ps.add("mode", strconv.Quote(string(m)), "%s or %s", ModeBuffered, ModeStrict)
	}
}

func (ps *problems) checkFallback(f Fallback) {
	if !f.Valid() {
		ps.add("fallback", strconv.Quote(string(f)), "%s or %s", FallbackNone, FallbackSnowflake)
	}
}

func (ps *problems) checkDescription(d string) {
	switch {
	case len(d) > MaxDescriptionLen:
		ps.add("description", fmt.Sprintf("of %d bytes", len(d)), "at most %d bytes", MaxDescriptionLen)
	case !utf8.ValidString(d):
		ps.add("description", "with invalid bytes", "UTF-8 text")
	}
}

// armFallback sets ns's limit when its fallback is snowflake and it has
// none, or adds a problem when the counter is already past it.
func (ps *problems) armFallback(ns *Namespace, smallest int64) {
	if ns.Fallback != FallbackSnowflake || ns.MaxIDLimit > 0 {
		return
	}
	limit := ns.slotLimit(FallbackLimit(smallest))
	if ns.MaxID >= limit {
		ps.add("fallback", string(FallbackSnowflake),
			"a counter below the smallest Snowflake ID now, %d, but max_id is already %d", smallest, ns.MaxID)
		return
	}
	ns.MaxIDLimit = limit
}

// slotLimit returns the largest slot whose ID is at most id.
func (ns Namespace) slotLimit(id int64) int64 {
	k, r := ns.Interleave()
	if id < r {
		return 0
	}
	return (id - r) / k
}

// MaxStride is the largest stride a namespace may have.
const MaxStride = 1 << 16

// checkStride: 1 ≤ k ≤ MaxStride, 0 ≤ r < k, start×k + r fits an int64.
func (ps *problems) checkStride(k, r, start int64) {
	if k < 1 || k > MaxStride {
		ps.add("stride", itoa(k), "1 to %d", MaxStride)
		return
	}
	if r < 0 || r >= k {
		ps.add("offset", itoa(r), "0 to the stride minus 1, %d", k-1)
		return
	}
	if c := (Namespace{Stride: k, Offset: r}).StrideCap(); start > c {
		ps.add("start", itoa(start), "at most %d, so that start×stride+offset fits 64 bits", c)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// NamespaceSpec is what an operator asks for when creating a namespace;
// nil and empty fields take the defaults.
type NamespaceSpec struct {
	Name string
	// Start is the first ID handed out (max_id = Start − 1); default 1.
	Start *int64
	// Step defaults to DefaultStep (moved into MinStep..MaxStep), MinStep to
	// step, MaxStep to step × MaxStepGrowth capped at MaxStepLimit.
	Step, MinStep, MaxStep *int64
	// Mode defaults to buffered, Fallback to none.
	Mode        *Mode
	Fallback    *Fallback
	Description string
	// Stride defaults to 1, Offset to 0; Start then counts slots.
	Stride, Offset *int64
}

// Validate reports a *SettingsError for the spec, apart from the fallback
// limit.
func (s NamespaceSpec) Validate() error {
	_, err := s.resolve()
	return err
}

// Namespace returns the namespace with defaults filled in; smallest (see
// FallbackLimit) matters only with the Snowflake fallback.
func (s NamespaceSpec) Namespace(smallest int64) (Namespace, error) {
	ns, err := s.resolve()
	if err != nil {
		return Namespace{}, err
	}
	var ps problems
	ps.armFallback(&ns, smallest)
	if err := ps.err(); err != nil {
		return Namespace{}, err
	}
	return ns, nil
}

func (s NamespaceSpec) resolve() (Namespace, error) {
	var ps problems
	if ValidNamespace(s.Name) != nil {
		ps.add("name", strconv.Quote(s.Name),
			"1 to %d characters of a-z, 0-9, '_', '.', '-', starting with a letter or digit", MaxNameLen)
	}
	start := int64(1)
	if s.Start != nil {
		if start = *s.Start; start < 1 {
			ps.add("start", itoa(start), "1 or more")
		}
	}
	step := int64(DefaultStep)
	if s.Step != nil {
		step = *s.Step
	} else {
		if s.MinStep != nil && *s.MinStep > step {
			step = *s.MinStep
		}
		if s.MaxStep != nil && *s.MaxStep < step {
			step = *s.MaxStep
		}
	}
	minStep := step
	if s.MinStep != nil {
		minStep = *s.MinStep
	}
	maxStep := step
	if step <= MaxStepLimit { // no overflow below
		maxStep = max(step, min(step*MaxStepGrowth, MaxStepLimit))
	}
	if s.MaxStep != nil {
		maxStep = *s.MaxStep
	}
	ps.checkSteps(step, minStep, maxStep)
	mode := ModeBuffered
	if s.Mode != nil {
		mode = *s.Mode
		ps.checkMode(mode)
	}
	fallback := FallbackNone
	if s.Fallback != nil {
		fallback = *s.Fallback
		ps.checkFallback(fallback)
	}
	ps.checkDescription(s.Description)
	stride, offset := int64(1), int64(0)
	if s.Stride != nil {
		stride = *s.Stride
	}
	if s.Offset != nil {
		offset = *s.Offset
	}
	ps.checkStride(stride, offset, start)
	if err := ps.err(); err != nil {
		return Namespace{}, err
	}
	return Namespace{
		Stride:      stride,
		Offset:      offset,
		Name:        s.Name,
		MaxID:       start - 1,
		Step:        step,
		MinStep:     minStep,
		MaxStep:     maxStep,
		Mode:        mode,
		Fallback:    fallback,
		Description: s.Description,
	}, nil
}

// NamespaceUpdate changes the fields that are not nil.
type NamespaceUpdate struct {
	Step        *int64
	MinStep     *int64
	MaxStep     *int64
	Mode        *Mode
	Fallback    *Fallback
	Description *string
	// MaxIDLimit sets the limit if the namespace has none; Apply fills it in.
	MaxIDLimit *int64
}

// IsZero reports whether u changes nothing.
func (u NamespaceUpdate) IsZero() bool { return u == NamespaceUpdate{} }

// Validate checks u's values on their own; Apply checks them against the
// row. The error is a *SettingsError.
func (u NamespaceUpdate) Validate() error {
	var ps problems
	for _, f := range []struct {
		setting string
		v       *int64
	}{{"step", u.Step}, {"min_step", u.MinStep}, {"max_step", u.MaxStep}} {
		if f.v != nil && (*f.v < 1 || *f.v > MaxStepLimit) {
			ps.add(f.setting, itoa(*f.v), "1 to %d", MaxStepLimit)
		}
	}
	if u.Mode != nil {
		ps.checkMode(*u.Mode)
	}
	if u.Fallback != nil {
		ps.checkFallback(*u.Fallback)
	}
	if u.Description != nil {
		ps.checkDescription(*u.Description)
	}
	return ps.err()
}

// Apply returns the namespace cur becomes under u and the update that makes
// it so (with MaxIDLimit when the fallback is turned on; see
// FallbackLimit). The error is a *SettingsError.
func (u NamespaceUpdate) Apply(cur Namespace, smallest int64) (Namespace, NamespaceUpdate, error) {
	if err := u.Validate(); err != nil {
		return Namespace{}, NamespaceUpdate{}, err
	}
	next := cur
	for _, f := range []struct {
		dst *int64
		v   *int64
	}{{&next.Step, u.Step}, {&next.MinStep, u.MinStep}, {&next.MaxStep, u.MaxStep}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if u.Mode != nil {
		next.Mode = *u.Mode
	}
	if u.Fallback != nil {
		next.Fallback = *u.Fallback
	}
	if u.Description != nil {
		next.Description = *u.Description
	}
	var ps problems
	ps.checkSteps(next.Step, next.MinStep, next.MaxStep)
	ps.armFallback(&next, smallest)
	if err := ps.err(); err != nil {
		return Namespace{}, NamespaceUpdate{}, err
	}
	if next.MaxIDLimit != cur.MaxIDLimit {
		u.MaxIDLimit = &next.MaxIDLimit
	}
	return next, u, nil
}

// Revive returns the row re-creating the deleted namespace tomb as ns
// leaves. Nodes may still hold ranges at or below the old max_id and the
// fallback may have served above the old limit, so ns must start above
// max_id, keeps the lower limit, and its version goes on from the old one
// so no stale compare-and-set matches. The error wraps ErrInvalidNamespace.
func (tomb Namespace) Revive(ns Namespace) (Namespace, error) {
	tk, tr := tomb.Interleave()
	if nk, nr := ns.Interleave(); tk != nk || tr != nr {
		// Another interleave would map old slots to other IDs.
		return Namespace{}, fmt.Errorf("%w: namespace %q was deleted with stride %d and offset %d; create it with the same ones",
			ErrInvalidNamespace, tomb.Name, tk, tr)
	}
	if ns.MaxID < tomb.MaxID {
		return Namespace{}, fmt.Errorf("%w: namespace %q was deleted at max_id %d; create it with a start above %d",
			ErrInvalidNamespace, tomb.Name, tomb.MaxID, tomb.MaxID)
	}
	if tomb.MaxIDLimit > 0 && (ns.MaxIDLimit == 0 || tomb.MaxIDLimit < ns.MaxIDLimit) {
		ns.MaxIDLimit = tomb.MaxIDLimit
	}
	if ns.MaxIDLimit > 0 && ns.MaxID > ns.MaxIDLimit {
		return Namespace{}, fmt.Errorf("%w: namespace %q was deleted with max_id_limit %d, which it keeps; create it with a start from %d to %d",
			ErrInvalidNamespace, tomb.Name, ns.MaxIDLimit, tomb.MaxID+1, ns.MaxIDLimit)
	}
	ns.Version = tomb.Version + 1
	ns.DeletedAt = time.Time{}
	return ns, nil
}

// Segment is a committed range First..Last (inclusive), with the row as
// the fetch left it.
type Segment struct {
	Namespace Namespace
	First     int64
	Last      int64
}

// ValidFetch refuses n below 1 (ErrInvalidNamespace).
func ValidFetch(name string, n int64) error {
	if n < 1 {
		return fmt.Errorf("fetch segment of %q: count %d below 1: %w", name, n, ErrInvalidNamespace)
	}
	return nil
}

// ValidReturnTail refuses a tail return that moves max_id up.
func ValidReturnTail(name string, expectMaxID, newMaxID int64) error {
	if newMaxID > expectMaxID {
		return fmt.Errorf("return tail of %q: new max_id %d above current %d: %w", name, newMaxID, expectMaxID, ErrInvalidNamespace)
	}
	return nil
}

// SegmentStore is what the segment allocator needs of a store. A deleted
// namespace does not exist for any of its calls.
type SegmentStore interface {
	// GetNamespace returns the row, or ErrNamespaceNotFound.
	GetNamespace(ctx context.Context, name string) (Namespace, error)

	// FetchSegment advances max_id by exactly n and version by one in one
	// atomic statement, returning (old max_id, new max_id] and the row as
	// that statement left it; concurrent fetches get disjoint ranges.
	//
	// A fetch never passes Namespace.Limit and is never shortened: asking for
	// more than Remaining changes nothing and returns ExhaustedError. n below
	// 1 returns ErrInvalidNamespace, a missing namespace ErrNamespaceNotFound.
	// An error (even an unknown commit) returns no range.
	//
	// The version returned is the fencing token of strict namespaces
	// (Batch.Revision): the one this statement left, greater than that of any
	// earlier committed fetch. Every write keeps this: ReturnTail increments
	// it, Update and Delete leave it, Revive goes on above it.
	FetchSegment(ctx context.Context, name string, n int64) (Segment, error)

	// ReturnTail sets max_id to newMaxID and increments version only if
	// max_id and version still equal the expected ones, and reports whether
	// it did (false for a missing namespace). newMaxID above expectMaxID is
	// refused (ValidReturnTail).
	ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error)
}

// NamespaceAdmin is what the admin paths need of a store. The store's
// table constraints refuse bad rows with ErrInvalidNamespace.
//
// DeleteNamespace leaves a tombstone, so that a namespace created again
// never starts below IDs handed out; to every other call it is missing.
type NamespaceAdmin interface {
	// GetNamespace returns the row, or ErrNamespaceNotFound.
	GetNamespace(ctx context.Context, name string) (Namespace, error)

	// CreateNamespace inserts ns with version 0 and database times, and
	// returns the row; a live name returns ErrNamespaceExists. A deleted
	// name is revived as Namespace.Revive says (ErrInvalidNamespace when it
	// refuses).
	CreateNamespace(ctx context.Context, ns Namespace) (Namespace, error)

	// ListNamespaces returns every live namespace in byte order of the name.
	ListNamespaces(ctx context.Context) ([]Namespace, error)

	// DeleteNamespace marks name deleted at database time and returns the
	// row (its MaxID the last ID handed out); ErrNamespaceNotFound if missing.
	DeleteNamespace(ctx context.Context, name string) (Namespace, error)

	// UpdateNamespace applies u, stamps updated_at and returns the row. It sets
	// max_id_limit only where none is set and leaves max_id and version, so a
	// node may still return a tail. ErrNamespaceNotFound if missing.
	UpdateNamespace(ctx context.Context, name string, u NamespaceUpdate) (Namespace, error)
}
