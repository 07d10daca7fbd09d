//go:build !linux

package snowflake

import "time"

// preciseSleep falls back to the runtime timer where nanosleep(2) is not
// used.
func preciseSleep(d time.Duration) {
	time.Sleep(d)
}
