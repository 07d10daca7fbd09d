package sqlite

import (
	"context"
	"fmt"

	"github.com/idgen-project/idgen/allocator"
)

var _ allocator.DurabilityChecker = (*Store)(nil)

// synchronousNames are the values of PRAGMA synchronous.
var synchronousNames = map[int]string{0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

// CheckDurability returns a risk when the connection's PRAGMA synchronous
// is below FULL (a power loss could undo acknowledged commits). Open sets
// FULL, so only a later change shows.
func (s *Store) CheckDurability(ctx context.Context) ([]allocator.DurabilityRisk, error) {
	var level int
	if err := s.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil {
		return nil, fmt.Errorf("sqlite: read PRAGMA synchronous: %w", err)
	}
	return synchronousRisks(level), nil
}

// synchronousRisks judges a PRAGMA synchronous level.
func synchronousRisks(level int) []allocator.DurabilityRisk {
	if level >= 2 {
		return nil
	}
	name, ok := synchronousNames[level]
	if !ok {
		name = fmt.Sprint(level)
	}
	return []allocator.DurabilityRisk{{
		Setting: "synchronous", Value: name,
		Fix: "PRAGMA synchronous = FULL on the store's connection (idgen's sqlite store sets it when it opens the database)",
	}}
}
