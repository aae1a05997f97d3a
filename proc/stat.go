package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// readStat returns the fields of /proc/<pid>/stat after the command name
// (statFields).
func readStat(pid int) ([][]byte, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	f, err := statFields(data)
	if err != nil {
		return nil, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return f, nil
}

// statFields returns the fields of a /proc/<pid>/stat line after the
// command name, which is in parentheses and may hold spaces and
// parentheses: the first is field 3 of proc(5) (the state), field n is at
// n-3. It needs the state at least.
func statFields(data []byte) ([][]byte, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("stat line %q has no command name", data)
	}
	f := bytes.Fields(data[i+1:])
	if len(f) == 0 {
		return nil, fmt.Errorf("stat line %q has no state", data)
	}
	return f, nil
}

// statUint parses field n (numbered as in proc(5)) of f, the fields
// statFields returns.
func statUint(f [][]byte, n int, name string) (uint64, error) {
	if len(f) <= n-3 {
		return 0, fmt.Errorf("stat line has %d fields after the name, no %s (field %d)", len(f), name, n)
	}
	v, err := strconv.ParseUint(string(f[n-3]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat %s %q: %w", name, f[n-3], err)
	}
	return v, nil
}

// StateAndExitSignal returns process pid's state letter (proc(5) field
// 3: 'R', 'S', 'Z', ...) and the signal its parent is sent when it ends
// (field 38, exit_signal; 0 for none).
func StateAndExitSignal(pid int) (byte, int, error) {
	f, err := readStat(pid)
	if err != nil {
		return 0, 0, err
	}
	sig, err := statUint(f, 38, "exit_signal")
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return f[0][0], int(sig), nil
}
