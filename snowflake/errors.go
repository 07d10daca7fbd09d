package snowflake

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by this package. Test for them with errors.Is.
var (
	// ErrInvalidLayout: Layout.Validate refused a layout, or NewGenerator
	// its widths.
	ErrInvalidLayout = errors.New("snowflake: invalid layout")

	// ErrInvalidSettings: NewGenerator got an ID or setting out of range.
	ErrInvalidSettings = errors.New("snowflake: invalid settings")

	// ErrOutOfRange: a Layout.Compose part does not fit its width.
	ErrOutOfRange = errors.New("snowflake: value out of range for the layout")

	// ErrInvalidID: text that is not a non-negative 64-bit integer.
	ErrInvalidID = errors.New("snowflake: invalid ID")

	// ErrInvalidFormat is returned by ParseFormat for an unknown name.
	ErrInvalidFormat = errors.New("snowflake: unknown ID format")

	// Wrapped by a *RefusalError from Next and NextN: the generator refused.

	// ErrClockBackward: the clock is further behind the last timestamp
	// than Settings.MaxBackwardWait.
	ErrClockBackward = errors.New("snowflake: clock moved backwards")
	// ErrBelowFloor: the clock is further behind the fence's floor than
	// Settings.MaxBackwardWait.
	ErrBelowFloor = errors.New("snowflake: clock is below the timestamp floor")
	// ErrAboveCeiling: the next timestamp would exceed the fence's ceiling.
	ErrAboveCeiling = errors.New("snowflake: timestamp ceiling reached")
	// ErrFenceCheck: the fence's check failed (its error is Cause).
	ErrFenceCheck = errors.New("snowflake: fence check failed")
	// ErrTimeOverflow: the clock is before the epoch or past the layout.
	ErrTimeOverflow = errors.New("snowflake: clock outside the layout's time range")
	// ErrStopped: Generator.Stop was called; the generator issues no more.
	ErrStopped = errors.New("snowflake: generator stopped")
)

// A RefusalError says why a Generator issued nothing: Err is one of the
// refusal errors, Cause the fence check's error for ErrFenceCheck.
type RefusalError struct {
	Err     error
	Cause   error
	NowMS   int64 // the clock reading, Unix milliseconds
	LimitMS int64 // the last timestamp issued, the floor or the ceiling, Unix milliseconds
}

func (e *RefusalError) Error() string {
	switch {
	case errors.Is(e.Err, ErrClockBackward):
		return fmt.Sprintf("%v: clock %s is %s behind the last timestamp issued", e.Err, fmtMS(e.NowMS), time.Duration(e.LimitMS-e.NowMS)*time.Millisecond)
	case errors.Is(e.Err, ErrBelowFloor):
		return fmt.Sprintf("%v: clock %s is %s below the floor %s", e.Err, fmtMS(e.NowMS), time.Duration(e.LimitMS-e.NowMS)*time.Millisecond, fmtMS(e.LimitMS))
	case errors.Is(e.Err, ErrAboveCeiling):
		return fmt.Sprintf("%v: clock %s, ceiling %s", e.Err, fmtMS(e.NowMS), fmtMS(e.LimitMS))
	case e.Cause != nil:
		return fmt.Sprintf("%v: %v", e.Err, e.Cause)
	}
	return e.Err.Error()
}

// Unwrap returns Err and, if set, Cause.
func (e *RefusalError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// RetryAfter estimates when the refusal may clear: the distance to the
// last timestamp or the floor for a clock behind them, else 0 (unknown).
func (e *RefusalError) RetryAfter() time.Duration {
	if (errors.Is(e.Err, ErrClockBackward) || errors.Is(e.Err, ErrBelowFloor)) && e.LimitMS > e.NowMS {
		return time.Duration(e.LimitMS-e.NowMS+1) * time.Millisecond
	}
	return 0
}

func fmtMS(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
