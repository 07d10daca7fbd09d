package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
)

// sweepStore is a sequence.Store with two sequences whose expiry of "bad"
// fails.
type sweepStore struct {
	sequence.Store // methods the sweep does not call
	listErr        error
}

func (s sweepStore) ListSequences(context.Context) ([]sequence.Sequence, error) {
	return []sequence.Sequence{{Name: "bad"}, {Name: "good"}}, s.listErr
}

func (s sweepStore) ExpireReservations(_ context.Context, name string) (int64, error) {
	if name == "bad" {
		return 0, errors.New("database on fire")
	}
	return 4, nil
}

// TestSequenceSweepErrorsAreCounted: a sweep whose store fails, in part
// or whole, is logged and counted, expires what it can, and the next
// sweep runs again.
func TestSequenceSweepErrorsAreCounted(t *testing.T) {
	var logs bytes.Buffer
	w := newSequenceSweeper(sequence.NewService(sweepStore{}, sequence.Settings{}), time.Hour, slog.New(slog.NewTextHandler(&logs, nil)))
	w.sweep(t.Context())
	if got, want := value(t, w.expired), 4.0; got != want {
		t.Errorf("expired after a sweep with one sequence failing: got %v, want %v", got, want)
	}
	if got := value(t, w.failures); got != 1 {
		t.Errorf("failures: got %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "expiring sequence reservations failed") || !strings.Contains(logs.String(), `sequence \"bad\"`) {
		t.Errorf("log: got %q, want the failure naming the sequence", logs.String())
	}
	w = newSequenceSweeper(sequence.NewService(sweepStore{listErr: errors.New("gone")}, sequence.Settings{}), time.Hour, slog.New(slog.DiscardHandler))
	w.sweep(t.Context())
	w.sweep(t.Context())
	if got := value(t, w.failures); got != 2 {
		t.Errorf("failures after two sweeps that could not list: got %v, want 2", got)
	}
	if got := value(t, w.expired); got != 0 {
		t.Errorf("expired: got %v, want 0", got)
	}
}
