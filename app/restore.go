package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/nodestate"
)

// checkRestore compares the state file (Config.StateFile) with the store's
// mark and refuses a store behind what the node saw it commit
// (allocator.ErrStoreBehind); otherwise it returns data wrapped to keep the
// file up to date. Without a state file or restore fence, data as it is.
func checkRestore(ctx context.Context, c Config, store, data allocator.Store, log *slog.Logger) (allocator.Store, *nodestate.Store, error) {
	if c.StateFile == "" {
		return data, nil, nil
	}
	fencer, ok := store.(allocator.RestoreFencer)
	if !ok {
		log.Warn("this store has no restore fence: the state file is not used", "state_file", c.StateFile)
		return data, nil, nil
	}
	file, err := nodestate.Open(c.StateFile, c.Clock)
	if err != nil {
		return nil, nil, fmt.Errorf("restore check (Config.StateFile): %w", err)
	}
	mark, err := fencer.StoreMark(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("restore check: read the store's mark: %w", err)
	}
	fresh, err := file.Start(mark)
	if err != nil {
		return nil, nil, fmt.Errorf("refusing to start: %w; stop every node and run 'idgen restore-fence' "+
			"(docs/operations.md, \"Runbook: restore\"), or remove %s if this store is meant to be older", err, c.StateFile)
	}
	if fresh {
		log.Warn("the state file was kept for another store; starting it afresh", "state_file", c.StateFile, "store_id", mark.StoreID)
	}
	log.Info("restore check passed", "state_file", c.StateFile, "store_id", mark.StoreID, "generation", mark.Generation)
	rec := nodestate.Wrap(data, file, log)
	return rec, rec, nil
}
