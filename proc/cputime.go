package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// maxThreads bounds the threads CPUClock reads per sample.
const maxThreads = 1 << 16

// CPUClock measures the CPU time a process's threads spend, in the kernel
// and in user space, to the nanosecond: the scheduler's own account of
// each thread (/proc/<pid>/task/<tid>/schedstat), summed. A thread that
// exits between two samples loses its last interval; one that appears
// counts from its start. Where schedstat is missing (a kernel without
// CONFIG_SCHED_INFO), the process's utime and stime are used, in clock
// ticks (/proc/<pid>/stat).
type CPUClock struct {
	pid     int
	threads map[int]time.Duration // each thread's time at the last sample
	// base is each thread's time when the clock first saw it: 0 for one
	// that appeared after the clock was made.
	base  map[int]time.Duration
	total time.Duration
	// statBase is the process's utime plus stime at the start, when
	// statOnly: schedstat is missing.
	statBase time.Duration
	statOnly bool
}

// NewCPUClock starts measuring pid's CPU time.
func NewCPUClock(pid int) (*CPUClock, error) {
	c := &CPUClock{pid: pid}
	threads, err := threadTimes(pid)
	if err == nil {
		c.threads, c.base = threads, make(map[int]time.Duration, len(threads))
		for tid, t := range threads {
			c.base[tid] = t
		}
		return c, nil
	}
	base, serr := statTime(pid)
	if serr != nil {
		return nil, fmt.Errorf("cpu time of process %d: %w", pid, err)
	}
	c.statBase, c.statOnly = base, true
	return c, nil
}

// Read returns the CPU time the process's threads spent since the clock
// was made.
func (c *CPUClock) Read() (time.Duration, error) {
	if c.statOnly {
		t, err := statTime(c.pid)
		if err != nil {
			return 0, fmt.Errorf("cpu time of process %d: %w", c.pid, err)
		}
		return t - c.statBase, nil
	}
	now, err := threadTimes(c.pid)
	if err != nil {
		return 0, fmt.Errorf("cpu time of process %d: %w", c.pid, err)
	}
	for tid, t := range now {
		if before, ok := c.threads[tid]; ok {
			if t > before {
				c.total += t - before
			}
		} else {
			c.total += t
			c.base[tid] = 0
		}
	}
	for tid := range c.base {
		if _, ok := now[tid]; !ok {
			delete(c.base, tid) // exited
		}
	}
	c.threads = now
	return c.total, nil
}

// Threads returns, for each thread alive at the last Read, the CPU time
// it spent since the clock was made (or since it appeared); nil where
// only the process's total is known.
func (c *CPUClock) Threads() map[int]time.Duration {
	if c.statOnly {
		return nil
	}
	out := make(map[int]time.Duration, len(c.threads))
	for tid, t := range c.threads {
		out[tid] = t - c.base[tid]
	}
	return out
}

// threadTimes returns the on-CPU time of each thread of pid.
func threadTimes(pid int) (map[int]time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(maxThreads)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("threads of process %d: %w", pid, err)
	}
	out := make(map[int]time.Duration, len(names))
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		data, err := os.ReadFile(dir + "/" + name + "/schedstat")
		if err != nil {
			if os.IsNotExist(err) {
				if _, serr := os.Stat(dir + "/" + name); serr != nil {
					continue // the thread exited
				}
			}
			return nil, err
		}
		ns, ok := firstField(data)
		if !ok {
			return nil, fmt.Errorf("%s/%s/schedstat: %q", dir, name, data)
		}
		out[tid] = time.Duration(ns)
	}
	return out, nil
}

// firstField parses the first number of a schedstat line.
func firstField(data []byte) (int64, bool) {
	f := bytes.Fields(data)
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	return n, err == nil && n >= 0
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture gi supports.
const clockTicks = 100

// statTime returns the process's utime plus stime, its exited threads
// included.
func statTime(pid int) (time.Duration, error) {
	f, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return statTimeOf(f)
}

// parseStatTime reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line.
func parseStatTime(data []byte) (time.Duration, error) {
	f, err := statFields(data)
	if err != nil {
		return 0, err
	}
	return statTimeOf(f)
}

// statTimeOf is utime plus stime from the fields statFields returns.
func statTimeOf(f [][]byte) (time.Duration, error) {
	u, err := statUint(f, 14, "utime")
	if err != nil {
		return 0, err
	}
	s, err := statUint(f, 15, "stime")
	if err != nil {
		return 0, err
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// MinorFaults returns the minor page faults of process pid so far (field
// 10 of /proc/<pid>/stat, its exited threads included): each maps a page
// it had no copy of, a fresh one or a copy of one it shared and wrote.
func MinorFaults(pid int) (uint64, error) {
	f, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	n, err := statUint(f, 10, "minflt")
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return n, nil
}
