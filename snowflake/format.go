package snowflake

import (
	"fmt"
	"math/bits"
	"strings"
)

// Format is a text form of an ID. Besides decimal, every form has a fixed
// length for a given ID width (Layout.Width) and an alphabet in ASCII
// order, so the string order of IDs of one width is their numeric order.
//
//	form     alphabet                            63 bits  53 bits
//	decimal  0-9, no padding                     1-19     1-16
//	base32   Crockford: 0-9 A-Z without I L O U  13       11
//	base62   0-9 A-Z a-z                         11       9
//	hex      0-9 a-f                             16       14
//
// base32 is written upper case and read in either case (I and L as 1, O
// as 0); hex is written lower case, read in either; base62 is
// case-sensitive.
type Format uint8

// The formats. The zero Format, FormatAny, writes decimal and reads every
// form (see DecodeID).
const (
	FormatAny Format = iota
	FormatDecimal
	FormatBase32
	FormatBase62
	FormatHex
)

var formatNames = [...]string{"", "decimal", "base32", "base62", "hex"}

// String returns the format's name: "decimal", "base32", "base62", "hex",
// or "" for FormatAny.
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// FormatNames lists the names ParseFormat accepts, for messages.
const FormatNames = "decimal, base32, base62, hex"

// ParseFormat returns the format called name ("" is FormatAny), or an
// error wrapping ErrInvalidFormat.
func ParseFormat(name string) (Format, error) {
	for i, n := range formatNames {
		if n == name {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q; want one of %s", ErrInvalidFormat, truncate(name), FormatNames)
}

const (
	base32Digits = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	base62Digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	hexDigits    = "0123456789abcdef"
)

// FormatWidth returns the characters format f writes for an ID of width
// bits (those of 2^bits - 1); 0 for decimal and FormatAny.
func FormatWidth(f Format, width int) int {
	width = min(max(width, 1), 63)
	switch f {
	case FormatBase32:
		return (width + 4) / 5
	case FormatHex:
		return (width + 3) / 4
	case FormatBase62:
		n := 1
		for v := uint64(1)<<width - 1; v >= 62; v /= 62 {
			n++
		}
		return n
	}
	return 0
}

// EncodeID returns id in format f for IDs of width bits; see AppendEncoded.
func EncodeID(id ID, f Format, width int) string {
	var b [24]byte
	return string(AppendEncoded(b[:0], id, f, width))
}

// AppendEncoded appends id in format f for IDs of width bits (decimal for
// FormatAny), allocating nothing beyond growing b. IDs above 2^width-1 take
// as many characters as needed; negative ones are decimal.
func AppendEncoded(b []byte, id ID, f Format, width int) []byte {
	if id < 0 || f == FormatAny || f == FormatDecimal || f > FormatHex {
		return id.AppendDecimal(b)
	}
	var digits string
	var shift uint // bits per digit; 0 for base62
	switch f {
	case FormatBase32:
		digits, shift = base32Digits, 5
	case FormatBase62:
		digits = base62Digits
	case FormatHex:
		digits, shift = hexDigits, 4
	}
	var buf [16]byte // 63 bits take at most 13 base32, 11 base62 or 16 hex digits
	i := len(buf)
	v := uint64(id)
	if shift > 0 {
		mask := uint64(1)<<shift - 1
		for ; v > 0; v >>= shift {
			i--
			buf[i] = digits[v&mask]
		}
	} else {
		for ; v > 0; v /= 62 {
			i--
			buf[i] = digits[v%62]
		}
	}
	for pad := FormatWidth(f, width) - (len(buf) - i); pad > 0; pad-- {
		b = append(b, '0')
	}
	return append(b, buf[i:]...)
}

// AppendDecimal appends the decimal form of id.
func (id ID) AppendDecimal(b []byte) []byte {
	b, _ = id.AppendText(b)
	return b
}

// digitValue returns the value of c in format f, or -1.
func digitValue(c byte, f Format) int {
	switch f {
	case FormatBase32:
		switch {
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		switch c {
		case 'I', 'L':
			return 1
		case 'O':
			return 0
		}
		return strings.IndexByte(base32Digits, c)
	case FormatBase62:
		return strings.IndexByte(base62Digits, c)
	case FormatHex:
		if c >= 'A' && c <= 'F' {
			c += 'a' - 'A'
		}
		return strings.IndexByte(hexDigits, c)
	}
	return -1
}

// DecodeID reads s as an ID of width bits in format f: fixed-width forms
// need exactly FormatWidth characters, and every value must fit the width.
// FormatAny reads digits-only strings as decimal, anything else as the one
// fixed-width form whose length and alphabet match; ambiguous strings
// (widths of 30 bits or fewer, or digits-only fixed forms) need their
// format. The error wraps ErrInvalidID and names the forms tried.
func DecodeID(s string, f Format, width int) (ID, error) {
	width = min(max(width, 1), 63)
	maxID := ID(uint64(1)<<width - 1)
	switch f {
	case FormatAny:
		if s != "" && strings.Trim(s, "0123456789") == "" {
			return decodeDecimal(s, maxID)
		}
		var found Format
		for _, c := range [...]Format{FormatBase32, FormatBase62, FormatHex} {
			if len(s) != FormatWidth(c, width) || !allDigits(s, c) {
				continue
			}
			if found != FormatAny {
				return 0, fmt.Errorf("%w: %q could be %s or %s: name its format", ErrInvalidID, truncate(s), found, c)
			}
			found = c
		}
		if found == FormatAny {
			return 0, fmt.Errorf("%w: %q is none of decimal (up to %d), base32 (%d characters), base62 (%d) or hex (%d)",
				ErrInvalidID, truncate(s), maxID, FormatWidth(FormatBase32, width), FormatWidth(FormatBase62, width), FormatWidth(FormatHex, width))
		}
		return decodeFixed(s, found, width, maxID)
	case FormatDecimal:
		return decodeDecimal(s, maxID)
	case FormatBase32, FormatBase62, FormatHex:
		return decodeFixed(s, f, width, maxID)
	}
	return 0, fmt.Errorf("%w: unknown format %d", ErrInvalidFormat, uint8(f))
}

func allDigits(s string, f Format) bool {
	for i := 0; i < len(s); i++ {
		if digitValue(s[i], f) < 0 {
			return false
		}
	}
	return true
}

func decodeDecimal(s string, maxID ID) (ID, error) {
	id, err := ParseID(s)
	if err != nil {
		return 0, err
	}
	if id > maxID {
		return 0, fmt.Errorf("%w: %s is above %d, the largest ID of the layout's width", ErrInvalidID, s, maxID)
	}
	return id, nil
}

func decodeFixed(s string, f Format, width int, maxID ID) (ID, error) {
	if w := FormatWidth(f, width); len(s) != w {
		return 0, fmt.Errorf("%w: %q is %d characters long; %s IDs of %d bits have %d", ErrInvalidID, truncate(s), len(s), f, width, w)
	}
	base := uint64(62)
	switch f {
	case FormatBase32:
		base = 32
	case FormatHex:
		base = 16
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d := digitValue(s[i], f)
		if d < 0 {
			return 0, fmt.Errorf("%w: %q: %q at %d is not a %s digit", ErrInvalidID, truncate(s), s[i], i, f)
		}
		hi, lo := bits.Mul64(v, base)
		lo, carry := bits.Add64(lo, uint64(d), 0)
		if hi != 0 || carry != 0 || lo > uint64(maxID) {
			return 0, fmt.Errorf("%w: %q is above %d, the largest ID of %d bits", ErrInvalidID, truncate(s), maxID, width)
		}
		v = lo
	}
	return ID(v), nil
}
