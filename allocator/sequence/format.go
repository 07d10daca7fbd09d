package sequence

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Format limits.
const (
	// MaxFormatLen bounds a format's text, in bytes.
	MaxFormatLen = 64
	// MaxWidth bounds a counter's width; 18 digits fit an int64.
	MaxWidth = 18
)

// fieldKind is what one piece of a format writes.
type fieldKind uint8

const (
	literal fieldKind = iota
	year4             // yyyy
	year2             // yy
	month             // MM
	day               // dd
	counter           // seq or seq:0N
)

type piece struct {
	kind  fieldKind
	text  string // literal text
	width int    // counter width; 0 for unpadded
}

// Format is a parsed format: literal text, date fields and one counter.
// Make one with ParseFormat.
type Format struct {
	pieces []piece
	width  int // the counter's width, 0 for unpadded
	year   bool
	month  bool
	day    bool
}

// ParseFormat parses a format such as "INV-{yyyy}-{seq:06}". Literal text
// may hold letters, digits, spaces and "-_./:#". A brace holds the counter
// ("seq", or "seq:0N" zero-padded to N digits, 1 to 18) or date fields run
// together (yyyy, yy, MM, dd). Exactly one counter is required; an
// unpadded one may not be directly followed by a date field.
func ParseFormat(text string) (Format, error) {
	if text == "" {
		return Format{}, fmt.Errorf("%w: empty format: want for example INV-{yyyy}-{seq:06}", ErrInvalid)
	}
	if len(text) > MaxFormatLen {
		return Format{}, fmt.Errorf("%w: format is %d bytes long, at most %d allowed", ErrInvalid, len(text), MaxFormatLen)
	}
	var (
		f        Format
		counters int
		rest     = text
	)
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			open = len(rest)
		}
		if open > 0 {
			lit := rest[:open]
			if err := checkLiteral(lit); err != nil {
				return Format{}, err
			}
			f.pieces = append(f.pieces, piece{kind: literal, text: lit})
			rest = rest[open:]
			continue
		}
		if rest[0] == '}' {
			return Format{}, fmt.Errorf("%w: format %q has a '}' without its '{'", ErrInvalid, text)
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return Format{}, fmt.Errorf("%w: format %q has a '{' without its '}'", ErrInvalid, text)
		}
		field := rest[1:end]
		rest = rest[end+1:]
		if field == "seq" || strings.HasPrefix(field, "seq:") {
			counters++
			w, err := parseCounter(field)
			if err != nil {
				return Format{}, err
			}
			f.width = w
			f.pieces = append(f.pieces, piece{kind: counter, width: w})
			continue
		}
		if err := f.parseDate(field); err != nil {
			return Format{}, err
		}
	}
	switch {
	case counters == 0:
		return Format{}, fmt.Errorf("%w: format %q has no counter field: add {seq} or {seq:0N}, e.g. INV-{yyyy}-{seq:06}", ErrInvalid, text)
	case counters > 1:
		return Format{}, fmt.Errorf("%w: format %q has %d counter fields, want exactly one", ErrInvalid, text, counters)
	}
	for i, p := range f.pieces {
		if p.kind == counter && p.width == 0 && i+1 < len(f.pieces) && f.pieces[i+1].kind != literal {
			return Format{}, fmt.Errorf("%w: format %q: an unpadded {seq} runs into the date field after it; pad it ({seq:06}) or put text between", ErrInvalid, text)
		}
	}
	return f, nil
}

// parseCounter returns the width of a counter field: "seq" or "seq:0N".
func parseCounter(field string) (int, error) {
	if field == "seq" {
		return 0, nil
	}
	spec := strings.TrimPrefix(field, "seq:")
	if len(spec) < 2 || spec[0] != '0' {
		return 0, fmt.Errorf("%w: counter field {%s}: want {seq} or {seq:0N} with N from 1 to %d", ErrInvalid, field, MaxWidth)
	}
	w, err := strconv.Atoi(spec[1:])
	if err != nil || w < 1 || w > MaxWidth || strconv.Itoa(w) != spec[1:] {
		return 0, fmt.Errorf("%w: counter field {%s}: want {seq} or {seq:0N} with N from 1 to %d", ErrInvalid, field, MaxWidth)
	}
	return w, nil
}

// parseDate appends the date fields run together in field.
func (f *Format) parseDate(field string) error {
	if field == "" {
		return fmt.Errorf("%w: empty field {}: want {seq}, {seq:0N} or date fields (yyyy, yy, MM, dd)", ErrInvalid)
	}
	for field != "" {
		switch {
		case strings.HasPrefix(field, "yyyy"):
			f.pieces, f.year, field = append(f.pieces, piece{kind: year4}), true, field[4:]
		case strings.HasPrefix(field, "yy"):
			f.pieces, f.year, field = append(f.pieces, piece{kind: year2}), true, field[2:]
		case strings.HasPrefix(field, "MM"):
			f.pieces, f.month, field = append(f.pieces, piece{kind: month}), true, field[2:]
		case strings.HasPrefix(field, "dd"):
			f.pieces, f.day, field = append(f.pieces, piece{kind: day}), true, field[2:]
		default:
			return fmt.Errorf("%w: unknown field at %q: want {seq}, {seq:0N} or date fields (yyyy, yy, MM, dd)", ErrInvalid, field)
		}
	}
	return nil
}

// checkLiteral refuses literal text a format may not hold.
func checkLiteral(lit string) error {
	for _, r := range lit {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_./:# ", r)) {
			continue
		}
		return fmt.Errorf("%w: character %q not allowed in a format's text: use letters, digits, spaces and -_./:#", ErrInvalid, r)
	}
	return nil
}

// Width returns the counter's width, 0 for an unpadded counter.
func (f Format) Width() int { return f.width }

// MaxNumber returns the largest number fitting the counter's width
// (10^width - 1), or the largest int64 when unpadded.
func (f Format) MaxNumber() int64 {
	if f.width == 0 {
		return 1<<63 - 1
	}
	m := int64(1)
	for range f.width {
		m *= 10
	}
	return m - 1
}

// Write returns n as the format writes it at t, dates in t's location.
func (f Format) Write(t time.Time, n int64) string {
	var b strings.Builder
	y, m, d := t.Date()
	for _, p := range f.pieces {
		switch p.kind {
		case literal:
			b.WriteString(p.text)
		case year4:
			pad(&b, int64(y), 4)
		case year2:
			pad(&b, int64(y%100), 2)
		case month:
			pad(&b, int64(m), 2)
		case day:
			pad(&b, int64(d), 2)
		case counter:
			pad(&b, n, p.width)
		}
	}
	return b.String()
}

func pad(b *strings.Builder, v int64, width int) {
	s := strconv.FormatInt(v, 10)
	for i := len(s); i < width; i++ {
		b.WriteByte('0')
	}
	b.WriteString(s)
}
