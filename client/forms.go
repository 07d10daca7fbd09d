package client

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// Format is a text form of an ID (snowflake.Format). Fixed-width forms pad
// to one length per width, so string order is numeric order.
type Format = snowflake.Format

// The formats.
const (
	FormatAny     = snowflake.FormatAny // reads any form; writes decimal
	FormatDecimal = snowflake.FormatDecimal
	FormatBase32  = snowflake.FormatBase32
	FormatBase62  = snowflake.FormatBase62
	FormatHex     = snowflake.FormatHex
)

// EncodeID returns id in form f, padded for IDs of width bits.
func EncodeID(id int64, f Format, width int) string {
	return snowflake.EncodeID(snowflake.ID(id), f, width)
}

// DecodeID reads s as an ID of width bits in form f (FormatAny guesses).
// The error matches ErrInvalidInput.
func DecodeID(s string, f Format, width int) (int64, error) {
	id, err := snowflake.DecodeID(s, f, width)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return int64(id), nil
}

// decodeAnswered reads an answer's ID in the form it names (empty:
// decimal), taking the widest width matching s's padded length.
func decodeAnswered(s, format string) (int64, error) {
	f, err := snowflake.ParseFormat(format)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	if f == FormatAny {
		f = FormatDecimal
	}
	width := 63
	for f != FormatDecimal && width > 1 && snowflake.FormatWidth(f, width) != len(s) {
		width--
	}
	id, err := snowflake.DecodeID(s, f, width)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	return int64(id), nil
}

// Composed is the range of Snowflake IDs of one millisecond.
type Composed struct {
	Time        time.Time // the millisecond, UTC
	First, Last int64     // its smallest and largest ID
}

// Compose returns the smallest and largest Snowflake ID of t's millisecond
// (GET /ids/compose). A time outside the layout's range matches ErrInvalid.
func (c *Client) Compose(ctx context.Context, t time.Time) (Composed, error) {
	var r struct {
		Time   time.Time `json:"time"`
		First  string    `json:"first"`
		Last   string    `json:"last"`
		Format string    `json:"format"`
	}
	q := url.Values{"time": {t.UTC().Format(time.RFC3339Nano)}}
	if err := c.get(ctx, "/ids/compose?"+q.Encode(), &r); err != nil {
		return Composed{}, err
	}
	first, err := decodeAnswered(r.First, r.Format)
	if err != nil {
		return Composed{}, err
	}
	last, err := decodeAnswered(r.Last, r.Format)
	if err != nil {
		return Composed{}, err
	}
	if last < first {
		return Composed{}, fmt.Errorf("%w: compose answered last %d below first %d", ErrBadResponse, last, first)
	}
	return Composed{Time: r.Time.UTC(), First: first, Last: last}, nil
}

// ParseText decomposes an ID given in any form (GET /ids/{text}).
func (c *Client) ParseText(ctx context.Context, text string) (Parts, error) {
	if text == "" {
		return Parts{}, fmt.Errorf("%w: empty ID", ErrInvalidInput)
	}
	return c.parse(ctx, url.PathEscape(text))
}
