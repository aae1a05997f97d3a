package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// atEntry is the auxiliary vector tag of the program entry point.
const atEntry = 9

// EntryPoint returns the runtime address of the program's entry point from
// /proc/<pid>/auxv; minus the ELF header's entry it gives the load bias of a
// position-independent executable. No stop is needed.
func EntryPoint(pid int) (uint64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/auxv")
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return 0, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
		case errors.Is(err, os.ErrPermission):
			return 0, fmt.Errorf("process %d: read auxv: %w", pid, ErrPermission)
		}
		return 0, fmt.Errorf("process %d: read auxv: %w", pid, err)
	}
	for i := 0; i+16 <= len(raw); i += 16 {
		if binary.LittleEndian.Uint64(raw[i:]) == atEntry {
			return binary.LittleEndian.Uint64(raw[i+8:]), nil
		}
	}
	return 0, fmt.Errorf("process %d: auxv has no AT_ENTRY", pid)
}
