package app

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/httpapi/statuspage"
)

// AuditConfig configures the audit trail (package audit). The zero value
// leaves it off.
type AuditConfig struct {
	// Sink is where the events go: "" (off), "stdout", "file:PATH" or
	// "clickhouse://user:password@host:8123/database?table=name"
	// (audit.OpenSink). Logs and errors show it with the password masked.
	Sink string
	// Settings are the pipeline's: buffer, batch size, flush and block
	// intervals (audit.RecorderSettings; Node, Clock and Logger are the node's).
	Settings audit.RecorderSettings
	// Stdout is where the "stdout" sink writes; nil is os.Stdout.
	Stdout io.Writer
}

// validate checks the settings and the sink's form without opening it.
func (c AuditConfig) validate() error {
	if c.Sink == "" {
		return nil
	}
	if _, err := c.Settings.Resolve(); err != nil {
		return err
	}
	if err := audit.CheckSink(c.Sink); err != nil {
		return fmt.Errorf("invalid AuditConfig.Sink: %w", err)
	}
	return nil
}

// openAudit starts the audit recorder of c and returns store wrapped to
// report to it; without a sink it returns store as it is and a nil
// recorder.
func (a *App) openAudit(c Config, store allocator.Store) (allocator.Store, error) {
	if c.Audit.Sink == "" {
		return store, nil
	}
	out := c.Audit.Stdout
	if out == nil {
		out = os.Stdout
	}
	sink, err := audit.OpenSink(c.Audit.Sink, out)
	if err != nil {
		return nil, err
	}
	s := c.Audit.Settings
	s.Clock, s.Logger = c.Clock, a.log
	rec, err := audit.New(sink, s)
	if err != nil {
		_ = sink.Close()
		return nil, err
	}
	a.audit = rec
	rec.Start()
	a.log.Info("audit trail on", "sink", sink.String())
	return audit.WrapStore(store, rec), nil
}

// closeAudit sends what the audit buffer holds, within ctx, and stops it.
func (a *App) closeAudit(ctx context.Context) error {
	if a.audit == nil {
		return nil
	}
	return a.audit.Close(ctx)
}

// Audit returns the node's audit recorder, nil when the audit is off.
func (a *App) Audit() *audit.Recorder { return a.audit }

// auditNotice returns the status page's source of the audit line, nil
// when the audit is off.
func (a *App) auditNotice() statuspage.AuditReporter {
	if a.audit == nil {
		return nil
	}
	return a.audit
}

// auditClickHouse returns the audit sink when it is ClickHouse, for
// GET /admin/audit/who; nil otherwise.
func (a *App) auditClickHouse() *audit.ClickHouse {
	if a.audit == nil {
		return nil
	}
	ch, _ := a.audit.Sink().(*audit.ClickHouse)
	return ch
}
