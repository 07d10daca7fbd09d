package main

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// pacerClock is the open loop's clock. Now is time.Now. Sleep waits on a
// timerfd(2) through the Go runtime's network poller: it wakes within tens
// of microseconds of its deadline (the runtime's timers round short sleeps
// up to a millisecond or more when the process is idle), and while it waits
// it holds no OS thread, so the connections it has just handed requests to
// run at once (a nanosleep(2) would keep their processor until the runtime
// took it back). One goroutine sleeps on it at a time. Close releases it.
type pacerClock struct {
	f   *os.File
	buf [8]byte
}

// newPacerClock returns a pacerClock, or an error when the kernel offers
// no timerfd; the caller then falls back to the system clock.
func newPacerClock() (*pacerClock, error) {
	const clockMonotonic = 1
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return nil, os.NewSyscallError("timerfd_create", errno)
	}
	return &pacerClock{f: os.NewFile(fd, "timerfd")}, nil
}

func (c *pacerClock) Now() time.Time { return time.Now() }

// itimerspec is struct itimerspec of timerfd_settime(2).
type itimerspec struct {
	interval, value syscall.Timespec
}

// Sleep arms the timer for d, once, and waits until it fires. Should the
// timer fail, it falls back to time.Sleep.
func (c *pacerClock) Sleep(d time.Duration) {
	if d <= 0 {
		return // a zero value would disarm the timer and wait forever
	}
	spec := itimerspec{value: syscall.NsecToTimespec(int64(d))}
	sc, err := c.f.SyscallConn()
	if err == nil {
		var errno syscall.Errno
		err = sc.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
		})
		if err == nil && errno != 0 {
			err = errno
		}
	}
	if err == nil {
		_, err = c.f.Read(c.buf[:]) // the number of expirations; blocks in the poller until the first
	}
	if err != nil {
		time.Sleep(d)
	}
}

func (c *pacerClock) Close() error { return c.f.Close() }
