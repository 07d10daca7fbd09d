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

// AuditConfig configures the audit trail (package audit); zero is off.
type AuditConfig struct {
	// Sink is where events go: "", "stdout", "file:PATH" or a clickhouse://
	// URL (audit.OpenSink); its password is masked in logs and errors.
	Sink string
	// Settings are the pipeline's (audit.RecorderSettings); Node, Clock and
	// Logger come from the node.
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

// openAudit starts c's audit recorder and returns store wrapped to report
// to it; without a sink, store itself and a nil recorder.
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

// auditNotice returns the status page's audit line source, nil when off.
func (a *App) auditNotice() statuspage.AuditReporter {
	if a.audit == nil {
		return nil
	}
	return a.audit
}

// auditClickHouse returns the sink when it is ClickHouse, else nil.
func (a *App) auditClickHouse() *audit.ClickHouse {
	if a.audit == nil {
		return nil
	}
	ch, _ := a.audit.Sink().(*audit.ClickHouse)
	return ch
}
