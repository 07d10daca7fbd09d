package snowflake

import (
	"fmt"
	"strconv"
	"time"
)

// ID is a Snowflake ID. Its JSON form is a decimal string (JavaScript
// numbers lose precision above 2^53); UnmarshalJSON also takes a number.
type ID int64

// ParseID parses a decimal ID in 0..2^63-1, else ErrInvalidID.
func ParseID(s string) (ID, error) {
	if len(s) == 0 || len(s) > 19 {
		return 0, fmt.Errorf("%w: %q", ErrInvalidID, truncate(s))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || s[0] == '+' {
		return 0, fmt.Errorf("%w: %q", ErrInvalidID, truncate(s))
	}
	return ID(n), nil
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// Int64 returns id as an int64.
func (id ID) Int64() int64 { return int64(id) }

// String returns id in decimal.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// AppendText appends the decimal form of id to b.
func (id ID) AppendText(b []byte) ([]byte, error) { return strconv.AppendInt(b, int64(id), 10), nil }

// MarshalText returns the decimal form of id.
func (id ID) MarshalText() ([]byte, error) { return id.AppendText(nil) }

// UnmarshalText parses the decimal form of an ID; see ParseID.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// MarshalJSON returns id as a JSON string.
func (id ID) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a JSON string or number holding a decimal ID,
// else ErrInvalidID.
func (id *ID) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	return id.UnmarshalText(b)
}

// Parts are the fields of an ID under a layout.
type Parts struct {
	Time       time.Time // the timestamp as an instant, UTC, millisecond precision
	Timestamp  int64     // milliseconds since the layout's epoch
	Datacenter int64
	Worker     int64
	Sequence   int64
}

// Decompose splits id into its parts under l.
func (l Layout) Decompose(id ID) Parts {
	l = l.orDefault()
	v := int64(id)
	seq := v & l.MaxSequence()
	v >>= l.SequenceBits
	worker := v & l.MaxWorker()
	v >>= l.WorkerBits
	dc := v & l.MaxDatacenter()
	ts := v >> l.DatacenterBits
	return Parts{
		Time:       time.UnixMilli(l.EpochMillis() + ts).UTC(),
		Timestamp:  ts,
		Datacenter: dc,
		Worker:     worker,
		Sequence:   seq,
	}
}

// Compose builds the ID of p under l (p.Time ignored; p.Timestamp in ms
// since the epoch), or ErrOutOfRange when a part does not fit.
func (l Layout) Compose(p Parts) (ID, error) {
	l = l.orDefault()
	for _, f := range []struct {
		name     string
		v, limit int64
	}{
		{"timestamp", p.Timestamp, l.MaxTimestamp()},
		{"datacenter", p.Datacenter, l.MaxDatacenter()},
		{"worker", p.Worker, l.MaxWorker()},
		{"sequence", p.Sequence, l.MaxSequence()},
	} {
		if f.v < 0 || f.v > f.limit {
			return 0, fmt.Errorf("%w: %s %d not in 0..%d", ErrOutOfRange, f.name, f.v, f.limit)
		}
	}
	return ID(p.Timestamp<<(l.DatacenterBits+l.WorkerBits+l.SequenceBits) |
		p.Datacenter<<(l.WorkerBits+l.SequenceBits) |
		p.Worker<<l.SequenceBits |
		p.Sequence), nil
}

// SmallestID returns the smallest ID of timestamp t under l (0 before the
// epoch); idgen keeps segment counters below it.
func (l Layout) SmallestID(t time.Time) ID {
	l = l.orDefault()
	ts := t.UnixMilli() - l.EpochMillis()
	if ts <= 0 {
		return 0
	}
	if ts > l.MaxTimestamp() {
		ts = l.MaxTimestamp()
	}
	return ID(ts << (l.DatacenterBits + l.WorkerBits + l.SequenceBits))
}

// Bounds returns the smallest and largest ID of t's millisecond under l,
// so IDs made from T1 to T2 are the key range Bounds(T1).first ..=
// Bounds(T2).last. ErrOutOfRange before the epoch or at or past End.
func (l Layout) Bounds(t time.Time) (first, last ID, err error) {
	l = l.orDefault()
	ts := t.UnixMilli() - l.EpochMillis()
	if ts < 0 || ts > l.MaxTimestamp() {
		return 0, 0, fmt.Errorf("%w: time %s lies outside the layout's range, %s to %s",
			ErrOutOfRange, t.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			time.UnixMilli(l.EpochMillis()).UTC().Format(time.RFC3339), l.End().Format(time.RFC3339))
	}
	shift := l.DatacenterBits + l.WorkerBits + l.SequenceBits
	first = ID(ts << shift)
	return first, first | ID(int64(1)<<shift-1), nil
}
