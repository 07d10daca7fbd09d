// Package peerimport plans idgen namespaces that take over from the
// segment tables of Meituan Leaf (leaf_alloc) and didi tinyid
// (tiny_id_info), one per row (docs/migration.md). Each starts above the
// row's max_id (plus an optional gap), so it never meets the source's IDs.
package peerimport

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/mysql"
	"github.com/idgen-project/idgen/allocator/postgres"
	"github.com/idgen-project/idgen/internal/dburl"
)

// Source is the system a table comes from.
type Source string

// The sources.
const (
	// Leaf is Meituan Leaf's segment mode (leaf_alloc).
	Leaf Source = "leaf"
	// Tinyid is didi tinyid (tiny_id_info).
	Tinyid Source = "tinyid"
)

// ParseSource parses "leaf" or "tinyid".
func ParseSource(s string) (Source, error) {
	switch Source(s) {
	case Leaf, Tinyid:
		return Source(s), nil
	}
	return "", fmt.Errorf("%w: %q (want leaf or tinyid)", ErrUnknownSource, s)
}

// DefaultTable returns the table the source keeps its counters in.
func (s Source) DefaultTable() string {
	if s == Tinyid {
		return "tiny_id_info"
	}
	return "leaf_alloc"
}

func (s Source) nameColumn() string {
	if s == Tinyid {
		return "biz_type"
	}
	return "biz_tag"
}

// Errors of the package.
var (
	ErrUnknownSource     = errors.New("unknown source")                 // not leaf or tinyid
	ErrInvalidTable      = errors.New("invalid table name")             // not a plain identifier
	ErrUnusableRows      = errors.New("rows that cannot be imported")   // wraps the rows Plan refuses
	ErrConflict          = errors.New("existing namespaces in the way") // below the source's max_id
	ErrUnsupportedSource = errors.New("unsupported source database")    // not postgres:// or mysql://
)

// Row is one row of a source table, as far as the import uses it.
type Row struct {
	Name  string // biz_tag (Leaf) or biz_type (tinyid)
	MaxID int64  // the largest ID the row's counter has reserved
	// Step is the range size; 0 for tinyid's NULL.
	Step int64
	// Delta and Remainder are tinyid's interleave; Leaf rows have 1 and 0.
	Delta, Remainder int64
	// Description is Leaf's description; empty for tinyid and NULL.
	Description string
}

// tableRE is an unquoted identifier, optionally qualified by a schema.
var tableRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63})?$`)

// Read returns every row of the source's table by name. It only reads.
func Read(ctx context.Context, db *sql.DB, src Source, table string) ([]Row, error) {
	if table == "" {
		table = src.DefaultTable()
	}
	if !tableRE.MatchString(table) {
		return nil, fmt.Errorf("%w %q: want an identifier such as %s or schema.%s", ErrInvalidTable, table, src.DefaultTable(), src.DefaultTable())
	}
	var query string
	switch src {
	case Leaf:
		query = "SELECT biz_tag, max_id, step, description FROM " + table + " ORDER BY biz_tag"
	case Tinyid:
		query = "SELECT biz_type, max_id, step, delta, remainder FROM " + table + " ORDER BY biz_type"
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownSource, src)
	}
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		r := Row{Delta: 1}
		var step sql.NullInt64
		var desc sql.NullString
		if src == Leaf {
			err = rows.Scan(&r.Name, &r.MaxID, &step, &desc)
		} else {
			err = rows.Scan(&r.Name, &r.MaxID, &step, &r.Delta, &r.Remainder)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
		r.Step, r.Description = step.Int64, desc.String
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	return out, nil
}

// Options adjust a plan.
type Options struct {
	// Gap is added above each max_id, for a source still in use.
	Gap int64
	// AcceptDelta imports tinyid rows with delta above 1, usually spread
	// over several databases: set it only when all are imported (later
	// imports raise the namespace, docs/migration.md).
	AcceptDelta bool
}

// Item is the namespace planned for one row.
type Item struct {
	Row   Row
	Spec  allocator.NamespaceSpec // Start is Row.MaxID + 1 + the gap
	Notes []string                // where the namespace differs from the row
}

// Start returns the first ID of the item's namespace.
func (it Item) Start() int64 { return *it.Spec.Start }

// Plan returns each row's namespace, or an error wrapping ErrUnusableRows
// listing every unusable row. A step below 1 becomes the default, one above
// allocator.MaxStepLimit the limit, with a note.
func Plan(src Source, rows []Row, o Options) ([]Item, error) {
	var problems []string
	if o.Gap < 0 {
		return nil, fmt.Errorf("%w: gap %d: want 0 or more", ErrUnusableRows, o.Gap)
	}
	seen := map[string]bool{}
	items := make([]Item, 0, len(rows))
	for _, r := range rows {
		where := fmt.Sprintf("%s %q", src.nameColumn(), r.Name)
		bad := func(format string, args ...any) {
			problems = append(problems, where+": "+fmt.Sprintf(format, args...))
		}
		if allocator.ValidNamespace(r.Name) != nil {
			bad("not an idgen namespace name (1 to %d characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit); rename it in the source and in its callers first",
				allocator.MaxNameLen)
			continue
		}
		if seen[r.Name] {
			bad("listed twice")
			continue
		}
		seen[r.Name] = true
		if r.MaxID < 0 {
			bad("max_id %d is negative", r.MaxID)
			continue
		}
		if r.MaxID > math.MaxInt64-1-o.Gap {
			bad("max_id %d leaves no ID above it (with the gap %d)", r.MaxID, o.Gap)
			continue
		}
		var notes []string
		if r.Delta < 1 || r.Remainder < 0 || r.Remainder >= r.Delta {
			bad("delta %d and remainder %d: want delta 1 or more and a remainder from 0 to delta-1", r.Delta, r.Remainder)
			continue
		}
		if r.Delta > 1 {
			if !o.AcceptDelta {
				bad("delta %d: tinyid serves this biz_type from several databases, one remainder each; import every one of them with --accept-delta (see docs/migration.md)", r.Delta)
				continue
			}
			notes = append(notes, fmt.Sprintf("tinyid served only IDs = %d mod %d; idgen serves every integer above the largest max_id imported", r.Remainder, r.Delta))
		}
		step := r.Step
		switch {
		case step < 1:
			step = allocator.DefaultStep
			notes = append(notes, fmt.Sprintf("no step in the source: idgen's default %d", step))
		case step > allocator.MaxStepLimit:
			step = allocator.MaxStepLimit
			notes = append(notes, fmt.Sprintf("step %d above idgen's limit: %d", r.Step, step))
		}
		start := r.MaxID + 1 + o.Gap
		desc := r.Description
		if desc == "" {
			desc = fmt.Sprintf("imported from %s %s (max_id %d)", src, src.DefaultTable(), r.MaxID)
		}
		spec := allocator.NamespaceSpec{Name: r.Name, Start: &start, Step: &step, Description: desc}
		if err := spec.Validate(); err != nil {
			bad("%v", err)
			continue
		}
		items = append(items, Item{Row: r, Spec: spec, Notes: notes})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnusableRows, strings.Join(problems, "; "))
	}
	return items, nil
}

// Open connects to the source (postgres:// or mysql://); errors hide the password.
func Open(ctx context.Context, dsn string) (*sql.DB, error) {
	if err := dburl.Check(dsn); err != nil {
		return nil, fmt.Errorf("invalid DSN (not shown): %w", err)
	}
	switch dburl.DialectOf(dsn) {
	case dburl.Postgres:
		return postgres.OpenDB(ctx, dsn)
	case dburl.MySQL:
		return mysql.OpenDB(ctx, dsn)
	}
	return nil, fmt.Errorf("%w: want a postgres:// or mysql:// URL (the DSN is not shown: it may hold a password)", ErrUnsupportedSource)
}

// Namespaces is what Check and Apply need of idgen's store.
type Namespaces interface {
	GetNamespace(ctx context.Context, name string) (allocator.Namespace, error)
	CreateNamespace(ctx context.Context, ns allocator.Namespace) (allocator.Namespace, error)
	FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error)
}

// Action is what the import does for one item.
type Action string

// The actions.
const (
	Create Action = "create" // no namespace of that name
	Keep   Action = "keep"   // it exists, its next ID at least the planned start
	// Raise: it exists below the start and is raised by a discarded fetch.
	Raise    Action = "raise"
	Conflict Action = "conflict" // it exists below the start, not to be raised
)

// Step is one item with what the import does for it.
type Step struct {
	Item
	Action   Action
	Existing allocator.Namespace // as found, for Keep, Raise and Conflict
}

// Check decides each item's action against store, changing nothing: with
// raise a namespace below the start is raised, else it wraps ErrConflict.
func Check(ctx context.Context, store Namespaces, items []Item, raise bool) ([]Step, error) {
	steps := make([]Step, 0, len(items))
	var conflicts []string
	for _, it := range items {
		st := Step{Item: it, Action: Create}
		ns, err := store.GetNamespace(ctx, it.Spec.Name)
		switch {
		case errors.Is(err, allocator.ErrNamespaceNotFound):
		case err != nil:
			return nil, fmt.Errorf("read namespace %q: %w", it.Spec.Name, err)
		case ns.MaxID >= it.Start()-1:
			st.Action, st.Existing = Keep, ns
		case raise:
			st.Action, st.Existing = Raise, ns
		default:
			st.Action, st.Existing = Conflict, ns
			conflicts = append(conflicts, fmt.Sprintf("namespace %q exists with next ID %d, not above max_id %d of the source",
				ns.Name, ns.MaxID+1, it.Row.MaxID))
		}
		steps = append(steps, st)
	}
	if len(conflicts) > 0 {
		return steps, fmt.Errorf("%w: %s; nothing was changed (--raise-existing advances such a namespace past the source)",
			ErrConflict, strings.Join(conflicts, "; "))
	}
	return steps, nil
}

// Apply runs Check's steps in order until one fails and returns how many
// ran; a namespace created meanwhile fails with ErrNamespaceExists.
func Apply(ctx context.Context, store Namespaces, steps []Step) (int, error) {
	for i, st := range steps {
		switch st.Action {
		case Create:
			ns, err := st.Spec.Namespace(0)
			if err != nil {
				return i, fmt.Errorf("namespace %q: %w", st.Spec.Name, err)
			}
			if _, err := store.CreateNamespace(ctx, ns); err != nil {
				return i, fmt.Errorf("create namespace %q: %w", st.Spec.Name, err)
			}
		case Raise:
			// Read again: a fetch since Check only raised it.
			cur, err := store.GetNamespace(ctx, st.Spec.Name)
			if err != nil {
				return i, fmt.Errorf("raise namespace %q: %w", st.Spec.Name, err)
			}
			if n := st.Start() - 1 - cur.MaxID; n > 0 {
				if _, err := store.FetchSegment(ctx, st.Spec.Name, n); err != nil {
					return i, fmt.Errorf("raise namespace %q by %d: %w", st.Spec.Name, n, err)
				}
			}
		case Conflict:
			return i, fmt.Errorf("%w: namespace %q", ErrConflict, st.Spec.Name)
		}
	}
	return len(steps), nil
}
