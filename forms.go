package idgen

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// NamespaceWidth is the bit width of a namespace's ID forms (its counter
// and its fallback IDs), so all its strings order as their numbers.
const NamespaceWidth = 63

// Encoding is how a transport writes one answer's IDs: a form and its
// padding width. The zero Format means none was named: decimal, and no
// text where IDs travel as numbers.
type Encoding struct {
	Format snowflake.Format
	Width  int
}

// Named reports whether the request or the setting named a form.
func (e Encoding) Named() bool { return e.Format != snowflake.FormatAny }

// Append appends id in e's form; it allocates nothing beyond growing b.
func (e Encoding) Append(b []byte, id int64) []byte {
	if e.Format == snowflake.FormatAny {
		return strconv.AppendInt(b, id, 10) // decimal, the common case, with no call
	}
	return snowflake.AppendEncoded(b, snowflake.ID(id), e.Format, e.Width)
}

// String returns id in e's form.
func (e Encoding) String(id int64) string {
	return snowflake.EncodeID(snowflake.ID(id), e.Format, e.Width)
}

// ParseFormat returns the format called name ("" for none), or an Invalid
// *Error listing the formats; every transport uses it.
func ParseFormat(name string) (snowflake.Format, error) {
	f, err := snowflake.ParseFormat(name)
	if err != nil {
		return 0, Errorf(Invalid, "format must be one of %s, got %q", snowflake.FormatNames, truncateDetail(name))
	}
	return f, nil
}

func truncateDetail(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// checkFormats checks Settings.Formats' keys and values.
func checkFormats(m map[string]snowflake.Format) error {
	for ns, f := range m {
		if ns != "" {
			if err := allocator.ValidNamespace(ns); err != nil {
				return fmt.Errorf("invalid Settings.Formats: %w", err)
			}
		}
		if f < snowflake.FormatDecimal || f > snowflake.FormatHex {
			return fmt.Errorf("invalid Settings.Formats[%q]: format %d; want one of %s", ns, f, snowflake.FormatNames)
		}
	}
	return nil
}

// Encoding returns how to write req's IDs: req.Format, else the
// namespace's setting, at the layout's width or NamespaceWidth.
func (s *Service) Encoding(req DrawRequest) Encoding {
	f := req.Format
	if f == snowflake.FormatAny && s.formats != nil {
		f = s.formats[req.Namespace]
	}
	if req.Namespace == "" {
		return Encoding{Format: f, Width: s.width}
	}
	return Encoding{Format: f, Width: NamespaceWidth}
}

// DecodeText reads text as a Snowflake ID of the node's layout in form f
// (FormatAny: any) and returns it with its parts, charged as one ID; text
// that is no ID of the layout is Invalid.
func (s *Service) DecodeText(caller Caller, text string, f snowflake.Format) (snowflake.ID, snowflake.Parts, error) {
	if err := s.Charge(caller); err != nil {
		return 0, snowflake.Parts{}, err
	}
	l := s.snowflakes.Layout()
	id, err := snowflake.DecodeID(text, f, l.Width())
	if err != nil {
		return 0, snowflake.Parts{}, &Error{Code: Invalid, Detail: fmt.Sprintf("not a Snowflake ID of this node's %d-bit layout: %v", l.Width(), err), Err: err}
	}
	return id, l.Decompose(id), nil
}

// Forms returns id in every form at the layout's width.
func (s *Service) Forms(id snowflake.ID) [4]string {
	w := s.snowflakes.Layout().Width()
	return [4]string{
		snowflake.EncodeID(id, snowflake.FormatDecimal, w),
		snowflake.EncodeID(id, snowflake.FormatBase32, w),
		snowflake.EncodeID(id, snowflake.FormatBase62, w),
		snowflake.EncodeID(id, snowflake.FormatHex, w),
	}
}

// Composed is the range of Snowflake IDs of one millisecond.
type Composed struct {
	// Time is the millisecond, UTC.
	Time time.Time
	// First and Last are the smallest and the largest ID of it.
	First, Last snowflake.ID
}

// Compose returns the smallest and largest ID of t's millisecond
// (Layout.Bounds), charged as one ID; t out of range is Invalid.
func (s *Service) Compose(caller Caller, t time.Time) (Composed, error) {
	if err := s.Charge(caller); err != nil {
		return Composed{}, err
	}
	first, last, err := s.snowflakes.Layout().Bounds(t)
	if err != nil {
		return Composed{}, ErrorOf(err, "")
	}
	return Composed{Time: time.UnixMilli(t.UnixMilli()).UTC(), First: first, Last: last}, nil
}

// FormatNumber returns the format of proto IdFormat number n (0 none, 1
// decimal, 2 base32, 3 base62, 4 hex), or an Invalid *Error.
func FormatNumber(n int32) (snowflake.Format, error) {
	if n < int32(snowflake.FormatAny) || n > int32(snowflake.FormatHex) {
		return 0, Errorf(Invalid, "format %d is none of %s", n, snowflake.FormatNames)
	}
	return snowflake.Format(n), nil
}
