// Package snowflake generates unique, time-ordered 64-bit IDs in memory.
//
// An ID is a positive int64 laid out, from the most significant bit down, as
//
//	+---+----------------------+------------+--------+--------------+
//	| 0 | timestamp (41 bits)  | dc (5)     | worker | sequence (12)|
//	|   | ms since the epoch   |            | (5)    |              |
//	+---+----------------------+------------+--------+--------------+
//
// with the default Layout (epoch 2026-01-01T00:00:00Z, about 69 years,
// 4,096 IDs per millisecond per worker). Widths and epoch can change;
// Layout.Validate refuses more than 63 bits or under 10 years of life. The
// js53 preset keeps IDs at or below 2^53 - 1. Besides decimal, IDs have
// fixed-width forms whose string order is numeric order (Format), and
// Layout.Bounds gives a millisecond's ID range for key range queries.
//
// A Generator is safe for concurrent use and every ID exceeds the one
// before. When a millisecond's sequence runs out, one caller sleeps to the
// next millisecond and the others (and, right after, callers losing the
// state race) queue behind it and are woken one at a time, in the order
// they came, so at the cap one core issues while the others sleep. Issuing without waiting takes no lock and allocates nothing. A
// clock step back up to Settings.MaxBackwardWait (10 ms) is waited out; a
// larger one makes Next return a *RefusalError wrapping ErrClockBackward.
//
// Two generators with the same datacenter and worker ID issue the same IDs;
// keeping them apart is the caller's job. idgen's lease keeper does it with
// a Fence: a floor, a ceiling and a validity check, changeable at run time,
// outside which a Generator issues nothing.
//
// The package depends only on the standard library.
package snowflake
