package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// maxMappings bounds the mappings Mappings reads (the kernel's default
// vm.max_map_count is 65530).
const maxMappings = 1 << 22

// Mapping is one line of /proc/<pid>/maps: a range of the address space,
// its protection, and the file it maps, if any.
type Mapping struct {
	Start, End uint64
	// Read, Write, Exec and Shared are its permissions (rwxs/p).
	Read, Write, Exec, Shared bool
	// Offset is the file offset of Start.
	Offset uint64
	// Inode is the mapped file's inode, 0 for anonymous memory.
	Inode uint64
	// Path is the mapped file, or a pseudo-path ("[stack]", "[heap]",
	// "[vdso]"), "" for anonymous memory.
	Path string
}

// Mappings reads the memory mappings of process pid.
func Mappings(pid int) ([]Mapping, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, fmt.Errorf("process %d: memory mappings: %w", pid, err)
	}
	return parseMappings(data)
}

// parseMappings parses the text of /proc/<pid>/maps.
func parseMappings(data []byte) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if len(out) >= maxMappings {
			return nil, fmt.Errorf("more than %d memory mappings", maxMappings)
		}
		line := sc.Text()
		// start-end perms offset dev inode [path]
		fields := strings.Fields(line)
		if len(fields) < 5 {
			return nil, fmt.Errorf("memory mapping %q: too few fields", line)
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(fields[2], 16, 64)
		inode, err4 := strconv.ParseUint(fields[4], 10, 64)
		perms := fields[1]
		if !ok || err1 != nil || err2 != nil || err3 != nil || err4 != nil || len(perms) != 4 || end < start {
			return nil, fmt.Errorf("memory mapping %q: malformed", line)
		}
		m := Mapping{Start: start, End: end, Offset: off, Inode: inode,
			Read: perms[0] == 'r', Write: perms[1] == 'w', Exec: perms[2] == 'x', Shared: perms[3] == 's'}
		if len(fields) > 5 {
			// The path is the rest of the line after the inode: it may hold
			// spaces.
			m.Path = strings.TrimSpace(afterFields(line, 5))
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("memory mappings: %w", err)
	}
	return out, nil
}

// afterFields returns what follows the first n space-separated fields of
// line.
func afterFields(line string, n int) string {
	for ; n > 0; n-- {
		line = strings.TrimLeft(line, " ")
		i := strings.IndexByte(line, ' ')
		if i < 0 {
			return ""
		}
		line = line[i:]
	}
	return line
}
