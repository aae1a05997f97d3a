package proc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/decodes"
)

// atEntry is the auxiliary vector tag of the program entry point.
const atEntry = 9

// EntryPoint returns the runtime address of the program's entry point from
// /proc/<pid>/auxv; minus the ELF header's entry it gives the load bias of a
// position-independent executable. No stop is needed.
func EntryPoint(pid int) (uint64, error) {
	raw, err := Auxv(pid)
	if err != nil {
		return 0, err
	}
	for i := 0; i+16 <= len(raw); i += 16 {
		if binary.LittleEndian.Uint64(raw[i:]) == atEntry {
			return binary.LittleEndian.Uint64(raw[i+8:]), nil
		}
	}
	return 0, fmt.Errorf("process %d: auxv has no AT_ENTRY", pid)
}

// Auxv returns the auxiliary vector of process pid, as /proc/<pid>/auxv
// holds it: (tag, value) pairs of 64-bit words.
func Auxv(pid int) ([]byte, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/auxv")
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
		case errors.Is(err, os.ErrPermission):
			return nil, fmt.Errorf("process %d: read auxv: %w", pid, ErrPermission)
		}
		return nil, fmt.Errorf("process %d: read auxv: %w", pid, err)
	}
	return raw, nil
}

// MonotonicOffset returns the CLOCK_MONOTONIC offset of the time namespace
// process pid lives in (0 outside time namespaces, or where the kernel has
// none): the process's monotonic clock reads the host's plus this. pid 0
// means gi itself.
func MonotonicOffset(pid int) (time.Duration, error) {
	who := "self"
	if pid != 0 {
		who = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + who + "/timens_offsets")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil // kernel without time namespaces
		}
		return 0, fmt.Errorf("process %s: read time namespace offsets: %w", who, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "monotonic" || f[0] == "1") {
			sec, err1 := strconv.ParseInt(f[1], 10, 64)
			nsec, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				return 0, fmt.Errorf("process %s: bad timens_offsets line %q", who, line)
			}
			return time.Duration(sec)*time.Second + time.Duration(nsec), nil
		}
	}
	return 0, nil
}

// Alive reports whether process pid exists and is neither a zombie nor dead
// (the state after the parenthesised command name in /proc/<pid>/stat).
func Alive(pid int) bool {
	f, err := readStat(pid)
	if err != nil {
		return false
	}
	return f[0][0] != 'Z' && f[0][0] != 'X'
}

// LoadBias returns what to add to a link-time address of exe to get its
// address in process pid, which runs it: 0 unless exe is a PIE, else the
// entry point the kernel recorded in the process's auxiliary vector minus
// the ELF header's. No stop is needed.
func LoadBias(pid int, exe *elfbin.Binary) (uint64, error) {
	decodes.Add(decodes.LoadBias, 1)
	if !exe.PIE {
		return 0, nil
	}
	entry, err := EntryPoint(pid)
	if err != nil {
		return 0, err
	}
	return entry - exe.File.Entry, nil
}
