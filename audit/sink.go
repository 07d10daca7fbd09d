package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/idgen-project/idgen/internal/dburl"
)

// ErrInvalidSink: a sink setting idgen cannot use.
var ErrInvalidSink = errors.New("invalid audit sink")

// OpenSink opens the sink spec names:
//
//	stdout                                   JSON lines on standard output
//	file:PATH                                JSON lines appended to PATH
//	clickhouse://user:pass@host:8123/db      ClickHouse over HTTP (clickhouses:// for HTTPS)
//
// ClickHouse takes ?table=NAME. Errors never show a password.
func OpenSink(spec string, stdout io.Writer) (Sink, error) {
	switch {
	case spec == "stdout":
		return NewJSONSink(nopCloser{stdout}, "stdout"), nil
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(spec, "file:")
		if path == "" {
			return nil, fmt.Errorf("%w: file: needs a path (file:/var/log/idgen/audit.jsonl)", ErrInvalidSink)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return nil, fmt.Errorf("audit sink: %w", err)
		}
		return NewJSONSink(f, "file:"+path), nil
	case strings.HasPrefix(spec, "clickhouse://"), strings.HasPrefix(spec, "clickhouses://"):
		return NewClickHouse(spec, nil)
	}
	return nil, fmt.Errorf("%w %s: want stdout, file:PATH or clickhouse://user:password@host:8123/database", ErrInvalidSink, RedactSink(spec))
}

// CheckSink reports a spec OpenSink would refuse, opening nothing.
func CheckSink(spec string) error {
	switch {
	case spec == "stdout":
		return nil
	case strings.HasPrefix(spec, "file:"):
		if spec == "file:" {
			return fmt.Errorf("%w: file: needs a path (file:/var/log/idgen/audit.jsonl)", ErrInvalidSink)
		}
		return nil
	case strings.HasPrefix(spec, "clickhouse://"), strings.HasPrefix(spec, "clickhouses://"):
		_, err := NewClickHouse(spec, nil)
		return err
	}
	return fmt.Errorf("%w %s: want stdout, file:PATH or clickhouse://user:password@host:8123/database", ErrInvalidSink, RedactSink(spec))
}

// RedactSink returns spec with any password masked.
func RedactSink(spec string) string {
	if spec == "stdout" || strings.HasPrefix(spec, "file:") {
		return spec
	}
	return dburl.Redact(spec)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// JSONSink writes each event as a JSON line, for log shippers.
type JSONSink struct {
	mu   sync.Mutex
	w    io.WriteCloser
	name string
}

// NewJSONSink returns a sink writing JSON lines to w, named name.
func NewJSONSink(w io.WriteCloser, name string) *JSONSink { return &JSONSink{w: w, name: name} }

// Write implements Sink.Write: one write of the whole batch.
func (s *JSONSink) Write(_ context.Context, events []Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	bw := bufio.NewWriter(s.w)
	enc := json.NewEncoder(bw)
	for i := range events {
		if err := enc.Encode(&events[i]); err != nil {
			return fmt.Errorf("audit %s: %w", s.name, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("audit %s: %w", s.name, err)
	}
	return nil
}

// String implements Sink.String.
func (s *JSONSink) String() string { return s.name }

// Close implements Sink.Close.
func (s *JSONSink) Close() error { return s.w.Close() }
