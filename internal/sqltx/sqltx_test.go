package sqltx

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// fakeTx records what happened to one transaction.
type fakeTx struct {
	id           int
	ended        string // "", "commit" or "rollback"
	rollCtxAlive bool   // the rollback's context had not ended
}

// fakeDB hands out fakeTx values and logs every call.
type fakeDB struct {
	txs       []*fakeTx
	beginErr  []error // consumed one per Begin; nil entries succeed
	commitErr []error // consumed one per Commit
}

func (d *fakeDB) ops() Ops[*fakeTx] {
	pop := func(errs *[]error) error {
		if len(*errs) == 0 {
			return nil
		}
		err := (*errs)[0]
		*errs = (*errs)[1:]
		return err
	}
	return Ops[*fakeTx]{
		Begin: func(context.Context) (*fakeTx, error) {
			if err := pop(&d.beginErr); err != nil {
				return nil, err
			}
			tx := &fakeTx{id: len(d.txs) + 1}
			d.txs = append(d.txs, tx)
			return tx, nil
		},
		Commit: func(_ context.Context, tx *fakeTx) error {
			if err := pop(&d.commitErr); err != nil {
				return err
			}
			tx.ended = "commit"
			return nil
		},
		Rollback: func(ctx context.Context, tx *fakeTx) error {
			tx.ended = "rollback"
			tx.rollCtxAlive = ctx.Err() == nil
			return nil
		},
	}
}

func (d *fakeDB) endings() []string {
	var out []string
	for _, tx := range d.txs {
		out = append(out, tx.ended)
	}
	return out
}

// conflictError stands for a driver's error type (pgconn.PgError,
// mysql.MySQLError).
type conflictError struct{ code string }

func (e *conflictError) Error() string { return "conflict " + e.code }

// retryConflicts is a predicate the way the stores write theirs.
func retryConflicts(err error) bool {
	var c *conflictError
	return errors.As(err, &c) && c.code == "40001"
}

func newTestRunner(d *fakeDB) *Runner[*fakeTx] {
	return New(d.ops(), Settings{Name: "test", Retryable: retryConflicts, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
}

func TestRunCommits(t *testing.T) {
	d := &fakeDB{}
	r := newTestRunner(d)
	var seen *fakeTx
	err := r.Run(t.Context(), func(tx *fakeTx) error { seen = tx; return nil })
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := d.endings(), []string{"commit"}; !slices.Equal(got, want) {
		t.Errorf("got transactions ending %q, want %q", got, want)
	}
	if seen != d.txs[0] {
		t.Errorf("fn got transaction %v, want the one begun", seen)
	}
	if r.Retries() != 0 {
		t.Errorf("Retries() = %d, want 0", r.Retries())
	}
}

func TestRunRetriesConflicts(t *testing.T) {
	conflict := &conflictError{"40001"}
	for _, tc := range []struct {
		name      string
		db        fakeDB
		failTries int // fn fails the first failTries tries with err
		err       error
		endings   []string
		retries   int64
	}{
		{"in a statement, wrapped", fakeDB{}, 2, fmt.Errorf("claim: %w", conflict), []string{"rollback", "rollback", "commit"}, 2},
		{"ErrRetry from fn", fakeDB{}, 1, fmt.Errorf("heartbeat: %w", ErrRetry), []string{"rollback", "commit"}, 1},
		{"at commit", fakeDB{commitErr: []error{conflict}}, 0, nil, []string{"rollback", "commit"}, 1},
		{"at begin", fakeDB{beginErr: []error{conflict}}, 0, nil, []string{"commit"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &tc.db
			r := newTestRunner(d)
			tries := 0
			err := r.Run(t.Context(), func(*fakeTx) error {
				tries++
				if tries <= tc.failTries {
					return tc.err
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Run: %v, want success", err)
			}
			if got := d.endings(); !slices.Equal(got, tc.endings) {
				t.Errorf("got transactions ending %q, want %q", got, tc.endings)
			}
			if got := r.Retries(); got != tc.retries {
				t.Errorf("Retries() = %d, want %d", got, tc.retries)
			}
		})
	}
}

func TestRunDoesNotRetryOtherErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		db        fakeDB
		fnErr     error
		wantIs    error
		wantEnded []string
	}{
		{"from fn", fakeDB{}, boom, boom, []string{"rollback"}},
		{"another code", fakeDB{}, &conflictError{"23505"}, nil, []string{"rollback"}},
		{"at commit", fakeDB{commitErr: []error{boom}}, nil, boom, []string{"rollback"}},
		{"at begin", fakeDB{beginErr: []error{boom}}, nil, boom, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &tc.db
			r := newTestRunner(d)
			tries := 0
			err := r.Run(t.Context(), func(*fakeTx) error { tries++; return tc.fnErr })
			if err == nil {
				t.Fatalf("Run succeeded, want an error")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("got %v, want an error wrapping %v", err, tc.wantIs)
			}
			var c *conflictError
			if tc.fnErr != nil && errors.As(tc.fnErr, &c) && !errors.As(err, &c) {
				t.Errorf("got %v, want the driver error to survive errors.As", err)
			}
			if got := d.endings(); !slices.Equal(got, tc.wantEnded) {
				t.Errorf("got transactions ending %q, want %q", got, tc.wantEnded)
			}
			if r.Retries() != 0 {
				t.Errorf("Retries() = %d, want 0", r.Retries())
			}
		})
	}
}

func TestRunErrorsNameTheStep(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		db   fakeDB
		want string
	}{
		{fakeDB{beginErr: []error{boom}}, "test: begin: boom"},
		{fakeDB{commitErr: []error{boom}}, "test: commit: boom"},
	} {
		d := &tc.db
		err := newTestRunner(d).Run(t.Context(), func(*fakeTx) error { return nil })
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	conflict := &conflictError{"40001"}
	t.Run("between tries", func(t *testing.T) {
		d := &fakeDB{}
		r := newTestRunner(d)
		ctx, cancel := context.WithCancel(t.Context())
		tries := 0
		err := r.Run(ctx, func(*fakeTx) error {
			tries++
			if tries == 2 {
				cancel()
			}
			return conflict
		})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, conflict) {
			t.Errorf("got %v, want an error wrapping context.Canceled and the last failure", err)
		}
		if tries != 2 {
			t.Errorf("got %d tries, want 2 (none after the context ended)", tries)
		}
		for i, tx := range d.txs {
			if tx.ended != "rollback" || !tx.rollCtxAlive {
				t.Errorf("transaction %d: ended %q, rollback context alive %v; want a rollback with a live context", i+1, tx.ended, tx.rollCtxAlive)
			}
		}
	})
	t.Run("before the first try", func(t *testing.T) {
		d := &fakeDB{}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := newTestRunner(d).Run(ctx, func(*fakeTx) error { t.Error("fn ran"); return nil })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		if len(d.txs) != 0 {
			t.Errorf("%d transactions begun, want none", len(d.txs))
		}
	})
}

func TestRunRollsBackOnPanic(t *testing.T) {
	d := &fakeDB{}
	r := newTestRunner(d)
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("the panic did not reach the caller")
			}
		}()
		_ = r.Run(t.Context(), func(*fakeTx) error { panic("bug") })
	}()
	if got, want := d.endings(), []string{"rollback"}; !slices.Equal(got, want) {
		t.Errorf("got transactions ending %q, want %q", got, want)
	}
}

func TestNilRetryableRetriesOnlyErrRetry(t *testing.T) {
	d := &fakeDB{}
	r := New(d.ops(), Settings{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	tries := 0
	err := r.Run(t.Context(), func(*fakeTx) error { tries++; return &conflictError{"40001"} })
	if err == nil || tries != 1 {
		t.Errorf("got %v after %d tries, want the conflict after 1", err, tries)
	}
	tries = 0
	err = r.Run(t.Context(), func(*fakeTx) error {
		tries++
		if tries == 1 {
			return ErrRetry
		}
		return nil
	})
	if err != nil || tries != 2 || r.Retries() != 1 {
		t.Errorf("got %v after %d tries, %d retries; want success after 2 tries, 1 retry", err, tries, r.Retries())
	}
	if err := New(d.ops(), Settings{}).Run(t.Context(), func(*fakeTx) error { return errors.New("x") }); err == nil || err.Error() != "x" {
		t.Errorf("zero Settings: got %v, want fn's error unchanged", err)
	}
}

func TestHasCode(t *testing.T) {
	code := func(e *conflictError) string { return e.code }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&conflictError{"40001"}, true},
		{&conflictError{"40P01"}, true},
		{fmt.Errorf("commit: %w", &conflictError{"40001"}), true},
		{errors.Join(errors.New("x"), &conflictError{"40P01"}), true},
		{&conflictError{"23505"}, false},
		{errors.New("40001"), false},
		{ErrRetry, false},
		{nil, false},
	} {
		if got := HasCode(tc.err, code, "40001", "40P01"); got != tc.want {
			t.Errorf("HasCode(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
