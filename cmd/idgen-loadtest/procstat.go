package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// serverStats is what the tool reads about the server's process from /proc.
type serverStats struct {
	PID   int     `json:"pid"`
	RSSKB int64   `json:"rss_kb"`     // VmRSS at the end of the run
	HWMKB int64   `json:"rss_hwm_kb"` // VmHWM: the peak RSS
	CPUS  float64 `json:"cpu_s"`      // CPU time (user + system) used during the run
	// RunqWaitS is how long the server's threads, added up, waited for a
	// CPU while runnable during the run (/proc/PID/task/*/schedstat): on
	// a machine with cores to spare it stays near zero, and a large value
	// means latency came from CPU contention rather than from the server.
	// Threads that ended during the run are not counted. Absent where
	// schedstat is not available.
	RunqWaitS *float64 `json:"runq_wait_s,omitempty"`
}

type procSample struct {
	rssKB, hwmKB int64
	cpu          time.Duration
	runqWait     time.Duration // -1 when schedstat is not available
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, which
// Linux fixes at 100 for user space on every architecture Go supports.
const userHZ = 100

// readProc reads a process's RSS from /proc/<pid>/status and its CPU time
// from /proc/<pid>/stat.
func readProc(pid int) (procSample, error) {
	var s procSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for line := range bytes.Lines(status) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			s.rssKB = parseKB(v)
		} else if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			s.hwmKB = parseKB(v)
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name may hold spaces: fields count from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := bytes.Fields(stat[i+1:])
	// After ')': state is field 3 of stat(5), utime 14, stime 15.
	if len(f) < 13 {
		return s, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	s.cpu = time.Duration(ut+st) * time.Second / userHZ
	s.runqWait = runqWait(pid)
	return s, nil
}

// runqWait adds up the time the threads of a process have spent runnable
// but waiting for a CPU, the second field of /proc/PID/task/TID/schedstat
// (nanoseconds), or returns -1 when it cannot be read.
func runqWait(pid int) time.Duration {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return -1
	}
	var sum time.Duration
	read := false
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := bytes.Fields(b)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
			sum += time.Duration(v)
			read = true
		}
	}
	if !read {
		return -1
	}
	return sum
}

func parseKB(v []byte) int64 {
	v = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))
	n, _ := strconv.ParseInt(string(v), 10, 64)
	return n
}

// processCPU returns the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy returns the CPU time all CPUs of the machine have spent busy
// (user, nice, system, irq, softirq, steal) since boot, from /proc/stat.
// Less this process's and the server's CPU time, it tells how much else
// ran during a measurement.
func machineBusy() (time.Duration, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := bytes.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, errors.New("malformed /proc/stat")
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return 0, errors.New("malformed /proc/stat")
		}
		busy += v
	}
	return time.Duration(busy) * time.Second / userHZ, nil
}
