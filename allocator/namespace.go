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

// This file holds the namespace half of the domain: the row of segments,
// the rules its settings obey (applied once here for every admin path: the
// HTTP admin API and idgen namespaces), and the two store interfaces of
// segments, each declared for its consumer.

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

// Rules of a namespace's settings, as NamespaceSpec and NamespaceUpdate
// apply them.
const (
	// DefaultStep is the step of a namespace created without one (moved
	// into min_step..max_step when those are given).
	DefaultStep = 1000
	// MaxStepGrowth: max_step defaults to step × MaxStepGrowth, capped at
	// MaxStepLimit.
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
	// MaxID is the last slot of the last range handed out; the next range
	// starts at MaxID+1. Without a stride a slot is its ID (see IDOf).
	MaxID int64
	// MaxIDLimit is the largest value max_id may take, or 0 for none (the
	// last slot whose ID fits an int64 then bounds it, see Limit). A
	// namespace gets one when its Snowflake fallback is turned on (see
	// FallbackLimit) and keeps it for good.
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
	// Stride (K, at least 1) and Offset (R, 0 <= R < K) interleave the
	// namespace with others of the same name elsewhere: the counter counts
	// slots n = 1, 2, …, and slot n is handed out as the ID n×K + R (see
	// IDOf). Namespaces of one name in separate databases, each with the
	// same stride and its own offset, hand out disjoint IDs without talking
	// to each other (docs/regions.md). Both are fixed at creation; the
	// defaults 1 and 0 make the ID the slot itself. MaxID, MaxIDLimit and
	// the start count slots.
	Stride int64
	Offset int64
	// DeletedAt is when the namespace was deleted (database time), zero for
	// a live one. Only NamespaceAdmin.DeleteNamespace returns a deleted
	// namespace: to every other call it does not exist.
	DeletedAt time.Time
}

// Limit returns the largest value the namespace's counter may reach:
// MaxIDLimit when it has one, else the largest int64; never above
// StrideCap, so that the last slot's ID fits an int64.
func (ns Namespace) Limit() int64 {
	if ns.MaxIDLimit > 0 {
		return min(ns.MaxIDLimit, ns.StrideCap())
	}
	return ns.StrideCap()
}

// StrideCap returns the largest slot whose ID (IDOf) fits an int64: the
// largest int64 for the default stride 1 and offset 0.
func (ns Namespace) StrideCap() int64 {
	k, r := ns.Interleave()
	return (math.MaxInt64 - r) / k
}

// Interleave returns Stride and Offset, reading a stride of 0 (a Namespace
// made without one) as the default 1. Stores write these, and refuse a
// stride below 1 or an offset outside 0..stride-1.
func (ns Namespace) Interleave() (stride, offset int64) {
	if ns.Stride == 0 {
		return 1, ns.Offset
	}
	return ns.Stride, ns.Offset
}

// IDOf returns the ID slot n of the counter is handed out as: n×Stride +
// Offset. n must lie in 1..StrideCap.
func (ns Namespace) IDOf(n int64) int64 {
	k, r := ns.Interleave()
	return n*k + r
}

// Remaining returns how many IDs the counter can still hand out: Limit()
// minus MaxID, 0 once the namespace is exhausted.
func (ns Namespace) Remaining() int64 { return max(ns.Limit()-ns.MaxID, 0) }

// ExhaustedError returns the error of a fetch of n IDs that ns, the row as
// it stands, cannot give: fewer than n IDs remain up to its limit. It wraps
// ErrNamespaceExhausted; callers add the namespace's name. Stores return it
// from FetchSegment.
func (ns Namespace) ExhaustedError(n int64) error {
	if left := ns.Remaining(); left > 0 {
		return fmt.Errorf("%w: %d IDs left up to its limit %d, %d asked for", ErrNamespaceExhausted, left, ns.Limit(), n)
	}
	return fmt.Errorf("%w: every ID up to its limit %d has been handed out", ErrNamespaceExhausted, ns.Limit())
}

// FallbackLimit is the rule that keeps a namespace's counter and its
// Snowflake fallback apart. smallest is the smallest Snowflake ID of the
// moment the fallback is turned on (SnowflakeSource.SmallestIDNow, or
// snowflake.Layout.SmallestID of that moment); the namespace's MaxIDLimit
// becomes one below it. The store never moves max_id past the limit (its
// fetch refuses, and a CHECK constraint backs it), and the fallback never
// serves an ID at or below it, so no ID can come from both, whatever the
// clocks or the other nodes do. The limit is set once and never raised or
// removed, not even when the fallback is turned off: IDs it served stay
// above the counter.
//
// With a stride the limit is a slot: the last one whose ID (IDOf) lies
// below smallest, and the fallback compares with the ID of the limit.
func FallbackLimit(smallest int64) int64 { return smallest - 1 }

// ValidNamespace reports whether name is a valid namespace name: 1 to 64
// characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit
// (^[a-z0-9][a-z0-9_.-]{0,63}$). The error wraps ErrInvalidNamespace.
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

// SettingsError lists the settings of a namespace that break its rules.
// NamespaceSpec and NamespaceUpdate return it; it wraps
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

// problems collects Problems.
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

// checkSteps adds the problems of a namespace's steps: 1 <= step <=
// MaxStepLimit, then (for a valid step) 1 <= min_step <= step <= max_step
// <= MaxStepLimit.
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

// armFallback gives ns, whose fallback is snowflake, its limit from
// smallest (FallbackLimit) unless it has one, and adds a problem when its
// counter is not below the limit: the two ID spaces would overlap.
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

// slotLimit returns the largest slot whose ID (IDOf) is at most id: id
// itself for the default stride and offset.
func (ns Namespace) slotLimit(id int64) int64 {
	k, r := ns.Interleave()
	if id < r {
		return 0
	}
	return (id - r) / k
}

// MaxStride is the largest stride a namespace may have.
const MaxStride = 1 << 16

// checkStride adds the problems of a stride k and offset r: 1 <= k <=
// MaxStride, 0 <= r < k, and start×k + r must fit an int64.
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

// NamespaceSpec is what an operator asks for when creating a namespace.
// Nil and empty fields take the defaults.
type NamespaceSpec struct {
	Name string
	// Start is the first ID handed out (max_id = Start − 1); default 1.
	Start *int64
	// Step defaults to DefaultStep moved into MinStep..MaxStep when those
	// are given; MinStep to the step; MaxStep to step × MaxStepGrowth,
	// capped at MaxStepLimit (and at least the step).
	Step, MinStep, MaxStep *int64
	// Mode defaults to buffered, Fallback to none.
	Mode        *Mode
	Fallback    *Fallback
	Description string
	// Stride defaults to 1, Offset to 0 (see Namespace.Stride). With a
	// stride, Start counts slots: the first ID is Start×Stride + Offset.
	Stride, Offset *int64
}

// Validate reports what is wrong with the spec, leaving out only what
// needs the Snowflake side (see Namespace): a *SettingsError listing every
// problem, or nil.
func (s NamespaceSpec) Validate() error {
	_, err := s.resolve()
	return err
}

// Namespace returns the namespace the spec asks for, with its defaults
// filled in. smallest is the smallest Snowflake ID of now (see
// FallbackLimit); it matters only for a spec with the Snowflake fallback,
// which is refused unless the counter lies below it. The error is a
// *SettingsError listing every problem.
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

// resolve fills in the defaults and checks everything but the fallback's
// limit.
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
	// MaxIDLimit sets the counter's limit if the namespace has none; a
	// limit once set is never changed. Apply fills it in when the update
	// turns the Snowflake fallback on.
	MaxIDLimit *int64
}

// IsZero reports whether u changes nothing.
func (u NamespaceUpdate) IsZero() bool { return u == NamespaceUpdate{} }

// Validate reports what is wrong with the values u sets, judged on their
// own: an unknown mode or fallback, a description too long, a step out of
// 1..MaxStepLimit. Whether the steps fit together is for Apply, which sees
// the row. The error is a *SettingsError.
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

// Apply returns the namespace cur becomes under u, checked as a whole, and
// the update that makes it so: u, plus the counter's limit when the result
// has the Snowflake fallback and cur has no limit (see FallbackLimit;
// smallest is the smallest Snowflake ID of now). Turning the fallback on
// for a counter that is not below that limit is refused. The error is a
// *SettingsError.
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

// Revive returns the row that re-creating the deleted namespace tomb as ns
// leaves: the rule of NamespaceAdmin.CreateNamespace for a name whose row
// is a tombstone. Nodes may still hold ranges of the deleted namespace, all
// at or below its max_id, and its Snowflake fallback may have served IDs
// above its max_id_limit; so the new namespace must start above the old
// max_id, and keeps the old limit when it is the lower one (a limit is
// never raised, see FallbackLimit). The version goes on from the old one,
// so that a compare-and-set on a range fetched before the deletion cannot
// match and the version never goes back. The error wraps
// ErrInvalidNamespace and says what start to give.
func (tomb Namespace) Revive(ns Namespace) (Namespace, error) {
	tk, tr := tomb.Interleave()
	if nk, nr := ns.Interleave(); tk != nk || tr != nr {
		// Another interleave would map the old slots to other IDs, some
		// of them perhaps handed out already.
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

// Segment is a range of IDs First..Last (inclusive) whose fetch committed,
// with the namespace row as the fetch left it (Namespace.MaxID == Last).
type Segment struct {
	Namespace Namespace
	First     int64
	Last      int64
}

// ValidFetch reports a fetch no store may carry out: n below 1. Stores call
// it before touching the database; the error wraps ErrInvalidNamespace.
func ValidFetch(name string, n int64) error {
	if n < 1 {
		return fmt.Errorf("fetch segment of %q: count %d below 1: %w", name, n, ErrInvalidNamespace)
	}
	return nil
}

// ValidReturnTail reports a tail return no store may carry out: one that
// would move max_id up. Stores call it before touching the database; the
// error wraps ErrInvalidNamespace.
func ValidReturnTail(name string, expectMaxID, newMaxID int64) error {
	if newMaxID > expectMaxID {
		return fmt.Errorf("return tail of %q: new max_id %d above current %d: %w", name, newMaxID, expectMaxID, ErrInvalidNamespace)
	}
	return nil
}

// SegmentStore is what the segment allocator needs of a store: the three
// calls it makes. This is the contract of the segment half of every Store;
// the stores' own comments only add how they keep it. A deleted namespace
// (NamespaceAdmin.DeleteNamespace) does not exist for any of them.
type SegmentStore interface {
	// GetNamespace returns the row of namespace name, or an error wrapping
	// ErrNamespaceNotFound.
	GetNamespace(ctx context.Context, name string) (Namespace, error)

	// FetchSegment advances the namespace's max_id by exactly n and its
	// version by one, in one atomic statement, and returns the range
	// (old max_id, new max_id] with the row as that statement left it.
	// Concurrent fetches, from any node, get disjoint ranges.
	//
	// A fetch never moves max_id past the namespace's limit (Namespace.
	// Limit: max_id_limit, or the largest int64) and is never shortened: a
	// fetch of more than Namespace.Remaining IDs changes nothing and
	// returns an error wrapping ErrNamespaceExhausted (from
	// Namespace.ExhaustedError). Asking for what is left is the caller's
	// rule: the segment allocator asks for min(step, Remaining()) of the
	// row it last saw, and reads the row again when refused, since another
	// node may have fetched since; a strict draw asks for exactly what it
	// needs and is refused if that is more than is left.
	//
	// n below 1 returns an error wrapping ErrInvalidNamespace (ValidFetch);
	// a missing namespace one wrapping ErrNamespaceNotFound. Any error,
	// including a commit whose outcome is unknown, returns no range: its IDs
	// are never handed out.
	//
	// The version returned (Segment.Namespace.Version) is the namespace's
	// revision, which a strict namespace's callers receive as a fencing
	// token (Batch.Revision): it is the version this fetch's own statement
	// left, never a later read, and it is greater than the version of
	// every fetch that committed before it, from any node, so no two
	// fetches of a namespace ever return the same one. Every write to the
	// row that could move the version keeps this: ReturnTail increments it,
	// UpdateNamespace and DeleteNamespace leave it, and CreateNamespace
	// over a tombstone goes on above the deleted row's (Namespace.Revive);
	// a refused fetch leaves it unchanged.
	FetchSegment(ctx context.Context, name string, n int64) (Segment, error)

	// ReturnTail gives back the unused tail of the last range fetched: it
	// sets max_id to newMaxID and increments version, but only if max_id
	// and version still equal expectMaxID and expectVersion (a
	// compare-and-set: nobody fetched since), and reports whether it did.
	// A namespace that does not exist, or was deleted, reports false and
	// changes nothing. newMaxID above
	// expectMaxID returns an error wrapping ErrInvalidNamespace
	// (ValidReturnTail).
	ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error)
}

// NamespaceAdmin is what the admin paths (the HTTP admin API, idgen
// namespaces) need of a store: reading and writing namespace rows. The
// rules of the settings are NamespaceSpec's and NamespaceUpdate's; the
// store adds the table's constraints, which refuse a row that breaks them
// with an error wrapping ErrInvalidNamespace and leave the table
// unchanged: steps out of order or below 1, an unknown mode or fallback, a
// negative max_id, a name over 64 bytes, max_id above max_id_limit, or the
// Snowflake fallback without a max_id_limit.
//
// A namespace is never removed from the table: DeleteNamespace leaves a
// tombstone (deleted_at), so that a namespace created again under the same
// name never starts below IDs already handed out. A deleted namespace does
// not exist for any other call: GetNamespace, UpdateNamespace, the
// SegmentStore calls and ListNamespaces treat it as missing. There is no
// table of namespace events: the admin layer logs deletions and revivals.
type NamespaceAdmin interface {
	// GetNamespace returns the row of namespace name, or an error wrapping
	// ErrNamespaceNotFound.
	GetNamespace(ctx context.Context, name string) (Namespace, error)

	// CreateNamespace inserts ns and returns the row as stored: the store
	// sets version to 0 and both times to database time, whatever ns
	// holds. A name in use returns an error wrapping ErrNamespaceExists.
	//
	// A name whose row was deleted is revived: the row becomes what
	// Namespace.Revive returns (version one above the deleted row's, max_id
	// not below it, its max_id_limit kept when lower), with both times set
	// to database time; when Revive refuses, the error wraps
	// ErrInvalidNamespace and the tombstone stays as it was.
	CreateNamespace(ctx context.Context, ns Namespace) (Namespace, error)

	// ListNamespaces returns every live namespace in byte order of the name.
	ListNamespaces(ctx context.Context) ([]Namespace, error)

	// DeleteNamespace marks namespace name deleted (deleted_at = database
	// time, updated_at likewise) and returns the row as deleted, whose
	// MaxID is the last ID the namespace can have handed out. Nodes may
	// still hand out IDs of ranges they fetched before, all at or below
	// that max_id. A missing or already deleted namespace returns an error
	// wrapping ErrNamespaceNotFound.
	DeleteNamespace(ctx context.Context, name string) (Namespace, error)

	// UpdateNamespace changes the settings u sets, stamps updated_at with
	// database time and returns the row after the change. It sets
	// max_id_limit only where the row has none; it leaves max_id and
	// version alone, so a node may still give back the tail of a range it
	// fetched before the change. A missing namespace returns an error
	// wrapping ErrNamespaceNotFound.
	UpdateNamespace(ctx context.Context, name string, u NamespaceUpdate) (Namespace, error)
}
