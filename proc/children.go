package proc

import (
	"os"
	"strconv"
	"strings"
)

// maxChildren bounds the children Children lists.
const maxChildren = 1 << 16

// Children returns the processes whose parent is process pid (any of its
// threads), from /proc/<pid>/task/<tid>/children; none where the kernel
// does not list them (CONFIG_PROC_CHILDREN) or pid is gone.
func Children(pid int) []int {
	var out []int
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, _ := os.ReadDir(dir)
	for _, task := range tasks {
		b, err := os.ReadFile(dir + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil && len(out) < maxChildren {
				out = append(out, n)
			}
		}
	}
	return out
}

// maxThreadsPolled bounds the threads ThreadInFutexWait reads.
const maxThreadsPolled = 1 << 14

// ThreadInFutexWait tells whether a thread of process pid is blocked in
// a futex wait (FUTEX_WAIT, private or not), as /proc/<pid>/task/<tid>/
// syscall shows it: the system call futexNr ("202" on amd64, "98" on
// arm64) and an operation whose command is 0.
func ThreadInFutexWait(pid int, futexNr string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, _ := os.ReadDir(dir)
	for i, task := range tasks {
		if i >= maxThreadsPolled {
			break
		}
		b, err := os.ReadFile(dir + task.Name() + "/syscall")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 3 || f[0] != futexNr {
			continue
		}
		if op, err := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 64); err == nil && op&^(128|256) == 0 {
			return true
		}
	}
	return false
}

// SilentChildren returns the children of process pid that send their
// parent no signal when they end (exit_signal 0: gi's frozen copies; a Go
// program's own children signal SIGCHLD): those that ended and were not
// reaped (zombie), or the others.
func SilentChildren(pid int, zombie bool) []int {
	var out []int
	for _, c := range Children(pid) {
		if st, sig, err := StateAndExitSignal(c); err == nil && sig == 0 && (st == 'Z') == zombie {
			out = append(out, c)
		}
	}
	return out
}
