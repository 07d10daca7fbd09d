// Package snowflake generates unique, time-ordered 64-bit IDs in memory.
//
// An ID is a positive int64 laid out, from the most significant bit down, as
//
//	+---+----------------------+------------+--------+--------------+
//	| 0 | timestamp (41 bits)  | dc (5)     | worker | sequence (12)|
//	|   | ms since the epoch   |            | (5)    |              |
//	+---+----------------------+------------+--------+--------------+
//
// with the default Layout: 41 bits of milliseconds since 2026-01-01T00:00:00Z
// (about 69 years), 5 bits of datacenter ID, 5 bits of worker ID and 12 bits
// of sequence, so one worker issues at most 4,096 IDs per millisecond. Every
// width and the epoch can be changed; Layout.Validate refuses layouts whose
// widths sum to more than 63 or whose timestamp runs out within 10 years.
// Narrower layouts make smaller IDs: the js53 preset (Presets) keeps every
// ID at or below 2^53 - 1, which a JavaScript number holds exactly.
//
// IDs have string forms besides decimal (Format): fixed-width Crockford
// base32, base62 and hex, whose string order is their numeric order.
// Layout.Bounds gives the smallest and largest ID of a millisecond, for key
// range queries by time.
//
// A Generator is safe for concurrent use. Every ID it returns is strictly
// greater than the one before. When a millisecond's sequence is used up,
// one caller sleeps to the next millisecond boundary and the others wait for
// it, rather than each spinning or sleeping on its own. Right after a
// millisecond that ran out, a caller of Next that loses the race for the
// state to another caller joins that wait too instead of racing again, so
// that at the cap one core issues while the others sleep. Issuing without
// waiting takes no lock and allocates nothing. A clock that
// steps back by up to Settings.MaxBackwardWait (10 ms by default) is waited
// out; a larger step back makes Next return a *RefusalError wrapping
// ErrClockBackward and issue nothing until the clock has caught up.
//
// Two generators with the same datacenter and worker ID issue the same IDs.
// Keeping worker IDs apart is the job of whoever assigns them; idgen's lease
// keeper does it with a lease table and a Fence: a floor and a ceiling on
// the timestamps a generator may use, and a validity check (the lease
// deadline), all changeable while the generator runs. A Generator never
// issues an ID whose timestamp lies outside the fence or while the check
// fails.
//
// The package has no dependencies outside the standard library and can be
// used on its own.
package snowflake
