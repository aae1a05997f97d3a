package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// writeTree writes files (path relative to root: contents) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMemoryCgroupsV1 reads a synthetic v1 memory hierarchy mounted
// under a path with a space (mountinfo's \040), with the mount's root
// below the hierarchy's (as in a container): the process's cgroup and
// its ancestors up to the mount, innermost first, each limit the least
// of its own and memory.stat's hierarchical_memory_limit, no limit
// where the kernel prints its page counter's maximum.
func TestMemoryCgroupsV1(t *testing.T) {
	root := t.TempDir()
	mnt := filepath.Join(root, "sys fs", "memory")
	const none = "9223372036854771712\n"
	writeTree(t, root, map[string]string{
		"proc/42/cgroup": "12:pids:/x\n4:cpu,memory:/pod/app/worker\n0::/\n",
		"proc/self/mountinfo": "22 1 0:20 / /proc rw - proc proc rw\n" +
			"35 31 0:32 /pod " + strings.ReplaceAll(mnt, " ", `\040`) + " rw,relatime - cgroup cgroup rw,cpu,memory\n" +
			"41 31 0:38 / /unified rw - cgroup2 cgroup2 rw\n",
		"sys fs/memory/app/worker/memory.limit_in_bytes": none,
		"sys fs/memory/app/worker/memory.usage_in_bytes": "104857600\n",
		"sys fs/memory/app/worker/memory.stat":           "cache 0\nhierarchical_memory_limit 536870912\n",
		"sys fs/memory/app/worker/memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
		"sys fs/memory/app/memory.limit_in_bytes":        "536870912\n",
		"sys fs/memory/app/memory.usage_in_bytes":        "209715200\n",
		"sys fs/memory/memory.limit_in_bytes":            none,
		"sys fs/memory/memory.usage_in_bytes":            "314572800\n",
	})
	cgs, err := memoryCgroups(filepath.Join(root, "proc"), "42")
	if err != nil {
		t.Fatal(err)
	}
	want := []MemoryCgroup{
		{Path: "/pod/app/worker", Dir: filepath.Join(mnt, "app/worker"), Limit: 512 << 20, Usage: 100 << 20, OOMKills: 3},
		{Path: "/pod/app", Dir: filepath.Join(mnt, "app"), Limit: 512 << 20, Usage: 200 << 20, OOMKills: -1},
		{Path: "/pod", Dir: mnt, Limit: NoMemoryLimit, Usage: 300 << 20, OOMKills: -1},
	}
	if len(cgs) != len(want) {
		t.Fatalf("got %+v, want %+v", cgs, want)
	}
	for i := range want {
		if cgs[i] != want[i] {
			t.Errorf("level %d: got %+v, want %+v", i, cgs[i], want[i])
		}
	}
	room, c := MemoryHeadroom(cgs)
	if c == nil || c.Path != "/pod/app" || room != 312<<20 {
		t.Errorf("MemoryHeadroom: %d bytes in %+v; want 312 MiB in /pod/app", room, c)
	}
	if err := os.WriteFile(filepath.Join(mnt, "app/memory.usage_in_bytes"), []byte("314572800\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if u, err := cgs[1].ReadUsage(); err != nil || u != 300<<20 {
		t.Errorf("ReadUsage: %d, %v; want 300 MiB", u, err)
	}
}

// TestMemoryCgroupsV2 reads a synthetic v2 hierarchy: memory.max ("max"
// for none), memory.current, memory.events' oom_kill; a level without
// the memory controller's files (the root) is left out.
// memory.high, where below memory.max, is the limit: past it the kernel
// throttles the cgroup's tasks.
func TestMemoryCgroupsV2(t *testing.T) {
	root := t.TempDir()
	mnt := filepath.Join(root, "cg")
	writeTree(t, root, map[string]string{
		"proc/7/cgroup":                              "0::/system.slice/svc.service\n",
		"proc/self/mountinfo":                        "30 23 0:26 / " + mnt + " rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
		"cg/system.slice/svc.service/memory.max":     "max\n",
		"cg/system.slice/svc.service/memory.high":    "max\n",
		"cg/system.slice/svc.service/memory.current": "1048576\n",
		"cg/system.slice/svc.service/memory.events":  "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n",
		"cg/system.slice/memory.max":                 "9437184\n",
		"cg/system.slice/memory.high":                "8388608\n",
		"cg/system.slice/memory.current":             "6291456\n",
		"cg/system.slice/memory.events":              "oom_kill 2\n",
		"cg/cgroup.procs":                            "1\n",
	})
	cgs, err := memoryCgroups(filepath.Join(root, "proc"), "7")
	if err != nil {
		t.Fatal(err)
	}
	want := []MemoryCgroup{
		{Path: "/system.slice/svc.service", Dir: filepath.Join(mnt, "system.slice/svc.service"), V2: true, Limit: NoMemoryLimit, Usage: 1 << 20, OOMKills: 1},
		{Path: "/system.slice", Dir: filepath.Join(mnt, "system.slice"), V2: true, Limit: 8 << 20, Usage: 6 << 20, OOMKills: 2},
	}
	if len(cgs) != len(want) {
		t.Fatalf("got %+v, want %+v", cgs, want)
	}
	for i := range want {
		if cgs[i] != want[i] {
			t.Errorf("level %d: got %+v, want %+v", i, cgs[i], want[i])
		}
	}
	if room, c := MemoryHeadroom(cgs); c == nil || room != 2<<20 {
		t.Errorf("MemoryHeadroom: %d in %+v; want 2 MiB in /system.slice", room, c)
	}
}

// TestMemoryCgroupsNone: no memory controller mounted, a cgroup outside
// gi's namespace, a process gone, a malformed limit.
func TestMemoryCgroupsNone(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"proc/1/cgroup":                 "4:memory:/a\n",
		"proc/2/cgroup":                 "0::/../../other\n",
		"proc/3/cgroup":                 "4:memory:/bad\n",
		"proc/self/mountinfo":           "35 31 0:32 / " + filepath.Join(root, "mem") + " rw - cgroup cgroup rw,memory\n",
		"mem/bad/memory.limit_in_bytes": "lots\n",
		"mem/bad/memory.usage_in_bytes": "1\n",
	})
	proc := filepath.Join(root, "proc")
	if err := os.WriteFile(filepath.Join(proc, "self/mountinfo"), []byte("22 1 0:20 / /proc rw - proc proc rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cgs, err := memoryCgroups(proc, "1"); err != nil || cgs != nil {
		t.Errorf("no memory mount: %+v, %v; want none, no error", cgs, err)
	}
	if _, err := memoryCgroups(proc, "2"); err == nil || !strings.Contains(err.Error(), "outside gi's cgroup namespace") {
		t.Errorf("a cgroup outside the namespace: %v", err)
	}
	if _, err := memoryCgroups(proc, "9"); err == nil {
		t.Error("no such process: no error")
	}
	if err := os.WriteFile(filepath.Join(proc, "self/mountinfo"), []byte("35 31 0:32 / "+filepath.Join(root, "mem")+" rw - cgroup cgroup rw,memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := memoryCgroups(proc, "3"); err == nil || !strings.Contains(err.Error(), "memory.limit_in_bytes") {
		t.Errorf("a malformed limit: %v", err)
	}
}

// TestMemoryCgroupsHost reads the real hierarchy: a v1 memory cgroup made
// for the test (where /sys/fs/cgroup/memory is v1's memory controller),
// limited to 96 MiB, holding a process: its limit and usage as the
// kernel's files give them, every ancestor up to the root after it.
func TestMemoryCgroupsHost(t *testing.T) {
	targets.RequirePrivilege(t, "creating a memory cgroup")
	const mnt = "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(mnt, "memory.limit_in_bytes")); err != nil {
		if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
			t.Fatalf("no cgroup v1 memory controller at %s: %v", mnt, err)
		}
		t.Skipf("no cgroup v1 memory controller at %s: %v", mnt, err)
	}
	self, err := SelfMemoryCgroups()
	if err != nil || len(self) == 0 || self[0].V2 {
		t.Fatalf("gi's own memory cgroups: %+v, %v", self, err)
	}
	dir := filepath.Join(mnt, "gi-test-cgroup-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := targets.Start(t, "/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && echo READY && exec sleep 600`, dir)
	t.Cleanup(func() {
		p.Kill()
		os.WriteFile(filepath.Join(self[0].Dir, "cgroup.procs"), []byte(strconv.Itoa(p.Pid)), 0)
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte("100663296"), 0); err != nil {
		t.Fatal(err)
	}
	cgs, err := MemoryCgroups(p.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(cgs) != 2 || cgs[0].Dir != dir || cgs[0].Path != "/"+filepath.Base(dir) || cgs[1].Dir != mnt || cgs[1].Path != "/" {
		t.Fatalf("got %+v; want %s then the root", cgs, dir)
	}
	if c := cgs[0]; c.Limit != 96<<20 || c.Usage <= 0 || c.Usage > 96<<20 || c.OOMKills != 0 {
		t.Errorf("%+v: want a limit of 96 MiB, some usage below it, no OOM kill", c)
	}
	if c := cgs[1]; c.Limit != NoMemoryLimit || c.Usage < cgs[0].Usage {
		t.Errorf("root %+v: want no limit, usage at least the child's", c)
	}
	if room, c := MemoryHeadroom(cgs); c == nil || c.Dir != dir || room != 96<<20-cgs[0].Usage {
		t.Errorf("MemoryHeadroom: %d in %+v", room, c)
	}
}
