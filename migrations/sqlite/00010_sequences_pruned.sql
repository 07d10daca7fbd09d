-- pruned_before records how far an operator pruned a sequence's ledger
-- (idgen sequences prune NAME --before PERIOD, docs/sequences.md): the
-- ledger rows of every period before it were deleted on purpose, so that
-- the CLI says "pruned" for those periods instead of showing
-- them empty. '' (the default, and every row from before this migration)
-- when nothing was pruned. The counters of pruned periods stay: no number
-- of a pruned period is handed out again.

-- +goose Up
ALTER TABLE sequences ADD COLUMN pruned_before TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sequences DROP COLUMN pruned_before;
