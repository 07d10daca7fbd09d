//go:build !linux

package snowflake

import "time"

// preciseSleep falls back to the runtime timer where nanosleep(2) is not
// used; it reports false so the lateness estimate is left alone.
func preciseSleep(d time.Duration) bool {
	time.Sleep(d)
	return false
}
