package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// NoMemoryLimit is MemoryCgroup.Limit for a cgroup without a limit.
const NoMemoryLimit = -1

// MemoryCgroup is one memory cgroup of a process's hierarchy (cgroup v1's
// memory controller, or cgroup v2 with it enabled): the process's own or
// one of its ancestors, whose limit counts as much.
type MemoryCgroup struct {
	// Path is the cgroup's path in its hierarchy, as /proc/<pid>/cgroup
	// names it ("/" for the root), and Dir the directory gi reads it
	// from (under a mount of the hierarchy in gi's mount namespace).
	Path, Dir string
	// V2 says the hierarchy is cgroup v2's (memory.max, memory.current,
	// memory.events), else v1's memory controller
	// (memory.limit_in_bytes, memory.usage_in_bytes, memory.oom_control).
	V2 bool
	// Limit is the bytes the cgroup may use: its own limit, on v1 the
	// least of it and memory.stat's hierarchical_memory_limit (which
	// counts ancestors gi may not see); NoMemoryLimit for none.
	Limit int64
	// Usage is the bytes charged to the cgroup and its descendants.
	Usage int64
	// OOMKills counts the processes its OOM killer killed (v1:
	// memory.oom_control's oom_kill; v2: memory.events'), -1 if the
	// kernel does not say.
	OOMKills int64
}

// Room returns the bytes left below the cgroup's limit (negative past
// it), or NoMemoryLimit without a limit.
func (c *MemoryCgroup) Room() int64 {
	if c.Limit == NoMemoryLimit {
		return NoMemoryLimit
	}
	return c.Limit - c.Usage
}

// maxCgroupDepth bounds the levels MemoryCgroups walks up; maxCgroupLines
// the lines it reads of /proc/<pid>/cgroup and of mountinfo.
const (
	maxCgroupDepth = 256
	maxCgroupLines = 1 << 16
)

// v1NoLimit is where a v1 limit reads as none: the kernel prints its
// page counter's maximum (9223372036854771712 with 4 KiB pages).
const v1NoLimit = 1 << 62

// MemoryCgroups returns the memory cgroups of process pid, its own first,
// then each ancestor up to the root of the hierarchy as gi's mount of it
// shows it, with their limits and usage read now. It returns none, and no
// error, when the process is in no memory cgroup gi can find (no memory
// controller mounted). Paths are resolved through gi's mounts
// (/proc/self/mountinfo), not the process's root: gi reads the
// hierarchy as mounted where it runs.
func MemoryCgroups(pid int) ([]MemoryCgroup, error) {
	return memoryCgroups("/proc", strconv.Itoa(pid))
}

// SelfMemoryCgroups is MemoryCgroups for gi's own process.
func SelfMemoryCgroups() ([]MemoryCgroup, error) {
	return memoryCgroups("/proc", "self")
}

// memoryCgroups is MemoryCgroups reading procDir (a tree laid out as
// /proc, for tests) for process pid ("self" or a number).
func memoryCgroups(procDir, pid string) ([]MemoryCgroup, error) {
	data, err := os.ReadFile(filepath.Join(procDir, pid, "cgroup"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("process %s: %w", pid, ErrNoSuchProcess)
		}
		return nil, fmt.Errorf("read the cgroups of process %s: %w", pid, err)
	}
	path, v2, ok := memoryCgroupPath(data)
	if !ok {
		return nil, nil
	}
	if path != "/" && (!strings.HasPrefix(path, "/") || strings.Contains(path+"/", "/../")) {
		return nil, fmt.Errorf("process %s: its memory cgroup %q is outside gi's cgroup namespace", pid, path)
	}
	mounts, err := os.ReadFile(filepath.Join(procDir, "self", "mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("read gi's mounts: %w", err)
	}
	root, mountPoint, ok := cgroupMount(mounts, path, v2)
	if !ok {
		return nil, nil
	}
	dir := filepath.Join(mountPoint, strings.TrimPrefix(path, root))
	var out []MemoryCgroup
	for depth := 0; depth < maxCgroupDepth; depth++ {
		c := MemoryCgroup{Path: path, Dir: dir, V2: v2}
		switch err := c.Refresh(); {
		case err == nil:
			out = append(out, c)
		case v2 && errors.Is(err, os.ErrNotExist):
			// No memory controller at this level (the v2 root, or
			// not enabled in its parent's subtree_control).
		default:
			return nil, err
		}
		if dir == mountPoint || path == "/" || path == root {
			return out, nil
		}
		dir, path = filepath.Dir(dir), filepath.Dir(path)
	}
	return nil, fmt.Errorf("process %s: memory cgroup %s nested deeper than %d levels", pid, path, maxCgroupDepth)
}

// memoryCgroupPath returns the path of the memory cgroup a process's
// /proc/<pid>/cgroup names: the v1 line whose controllers include memory,
// else the v2 line ("0::/path"). ok is false for neither.
func memoryCgroupPath(data []byte) (path string, v2, ok bool) {
	unified := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 0; sc.Scan() && n < maxCgroupLines; n++ {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			unified = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				return f[2], false, true
			}
		}
	}
	if unified != "" {
		return unified, true, true
	}
	return "", false, false
}

// cgroupMount finds, in mountinfo (proc(5)), a mount of the hierarchy
// (v2's, or v1's with the memory controller) whose root holds path, and
// returns that root and where it is mounted.
func cgroupMount(mountinfo []byte, path string, v2 bool) (root, mountPoint string, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 0; sc.Scan() && n < maxCgroupLines; n++ {
		pre, post, found := strings.Cut(sc.Text(), " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch {
		case v2 && g[0] == "cgroup2":
		case !v2 && g[0] == "cgroup" && hasOption(g[2], "memory"):
		default:
			continue
		}
		r := unescapeMount(f[3])
		if r == "/" || path == r || strings.HasPrefix(path, r+"/") {
			return r, unescapeMount(f[4]), true
		}
	}
	return "", "", false
}

// hasOption reports whether the comma-separated options hold opt.
func hasOption(options, opt string) bool {
	for _, o := range strings.Split(options, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// unescapeMount undoes mountinfo's octal escapes (`\040` for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Refresh reads the cgroup's limit, usage and OOM kills again.
func (c *MemoryCgroup) Refresh() error {
	usage, err := c.ReadUsage()
	if err != nil {
		return err
	}
	c.Usage, c.OOMKills = usage, -1
	if c.V2 {
		max, err := c.readFile("memory.max")
		if err != nil {
			return err
		}
		if c.Limit = NoMemoryLimit; max != "max" {
			if c.Limit, err = strconv.ParseInt(max, 10, 64); err != nil {
				return fmt.Errorf("memory cgroup %s: memory.max: %w", c.Path, err)
			}
		}
		// Past memory.high the kernel throttles every task of the
		// cgroup: a limit as much as memory.max.
		if high, err := c.readFile("memory.high"); err == nil && high != "max" {
			if h, err := strconv.ParseInt(high, 10, 64); err == nil && (c.Limit == NoMemoryLimit || h < c.Limit) {
				c.Limit = h
			}
		}
		if n, ok := c.readKey("memory.events", "oom_kill"); ok {
			c.OOMKills = n
		}
		return nil
	}
	limit, err := c.readFile("memory.limit_in_bytes")
	if err != nil {
		return err
	}
	if c.Limit, err = strconv.ParseInt(limit, 10, 64); err != nil {
		return fmt.Errorf("memory cgroup %s: memory.limit_in_bytes: %w", c.Path, err)
	}
	if n, ok := c.readKey("memory.stat", "hierarchical_memory_limit"); ok && n < c.Limit {
		c.Limit = n
	}
	if c.Limit >= v1NoLimit {
		c.Limit = NoMemoryLimit
	}
	if n, ok := c.readKey("memory.oom_control", "oom_kill"); ok {
		c.OOMKills = n
	}
	return nil
}

// ReadUsage reads the bytes charged to the cgroup now (v1:
// memory.usage_in_bytes; v2: memory.current), without changing c.
func (c *MemoryCgroup) ReadUsage() (int64, error) {
	name := "memory.usage_in_bytes"
	if c.V2 {
		name = "memory.current"
	}
	s, err := c.readFile(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memory cgroup %s: %s: %w", c.Path, name, err)
	}
	return n, nil
}

// readFile returns the cgroup's file name, trimmed.
func (c *MemoryCgroup) readFile(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, name))
	if err != nil {
		return "", fmt.Errorf("memory cgroup %s: %w", c.Path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// readKey returns the value of key in the cgroup's flat-keyed file name
// ("key value" lines); ok is false if the file or the key is missing.
func (c *MemoryCgroup) readKey(name, key string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(c.Dir, name))
	if err != nil {
		return 0, false
	}
	for n, line := range strings.Split(string(b), "\n") {
		if n >= maxCgroupLines {
			break
		}
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			if x, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return x, true
			}
		}
	}
	return 0, false
}

// MemoryHeadroom returns the least room left below a limit among cgs
// (MemoryCgroup.Room) and the cgroup that has it; nil and NoMemoryLimit
// when none has a limit.
func MemoryHeadroom(cgs []MemoryCgroup) (int64, *MemoryCgroup) {
	var tightest *MemoryCgroup
	for i := range cgs {
		c := &cgs[i]
		if c.Limit == NoMemoryLimit {
			continue
		}
		if tightest == nil || c.Room() < tightest.Room() {
			tightest = c
		}
	}
	if tightest == nil {
		return NoMemoryLimit, nil
	}
	return tightest.Room(), tightest
}
