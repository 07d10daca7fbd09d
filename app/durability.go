package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/idgen-project/idgen/allocator"
)

// checkDurability asks the store (allocator.DurabilityChecker) how its
// database commits. A risk refuses the start with ErrUnsafeDurability
// unless allowUnsafe, which logs it instead; warnings never refuse. It
// returns the line /readyz and the status page show.
func checkDurability(ctx context.Context, store allocator.Store, allowUnsafe bool, log *slog.Logger) (string, error) {
	dc, ok := store.(allocator.DurabilityChecker)
	if !ok {
		log.Warn("database durability not checked: the store cannot read its settings")
		return "unchecked", nil
	}
	risks, err := dc.CheckDurability(ctx)
	if err != nil {
		if !allowUnsafe {
			return "", fmt.Errorf("check database durability: %w (set Config.AllowUnsafeDurability to serve without the check)", err)
		}
		log.Warn("database durability not checked; serving anyway (--allow-unsafe-durability)", "error", err)
		return "unchecked (overridden)", nil
	}
	var unsafe, warnings []allocator.DurabilityRisk
	for _, r := range risks {
		if r.Warning {
			warnings = append(warnings, r)
		} else {
			unsafe = append(unsafe, r)
		}
	}
	for _, r := range warnings {
		log.Warn("database durability: a failover may lose acknowledged commits", "setting", r.String(), "fix", r.Fix)
	}
	if len(unsafe) == 0 {
		if len(warnings) > 0 {
			return "ok (warning: " + riskNames(warnings) + ")", nil
		}
		return "ok", nil
	}
	if !allowUnsafe {
		msgs := make([]string, len(unsafe))
		for i, r := range unsafe {
			msgs[i] = fmt.Sprintf("%s (fix: %s)", r, r.Fix)
		}
		return "", fmt.Errorf("refusing to serve: %w: %s; set Config.AllowUnsafeDurability to serve anyway",
			ErrUnsafeDurability, strings.Join(msgs, "; "))
	}
	for _, r := range unsafe {
		log.Warn("unsafe database durability overridden by --allow-unsafe-durability: a crash can undo acknowledged commits and IDs can be handed out twice",
			"setting", r.String(), "fix", r.Fix)
	}
	return "unsafe: " + riskNames(unsafe) + " (overridden)", nil
}

// riskNames returns "a=1, b=2".
func riskNames(risks []allocator.DurabilityRisk) string {
	names := make([]string, len(risks))
	for i, r := range risks {
		names[i] = r.String()
	}
	return strings.Join(names, ", ")
}
