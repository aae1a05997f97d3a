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
