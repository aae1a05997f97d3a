package inspect

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestFdSyscallNumbers checks gi's tables of fd system calls, amd64 and
// arm64 both whatever the host, against golang.org/x/sys's generated
// tables of each architecture (read from its source in the module cache).
func TestFdSyscallNumbers(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("locate golang.org/x/sys: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	def := regexp.MustCompile(`^\s*(SYS_\w+)\s*=\s*(\d+)\s*$`)
	for _, arch := range []string{"amd64", "arm64"} {
		f, err := os.Open(filepath.Join(dir, "unix", "zsysnum_linux_"+arch+".go"))
		if err != nil {
			t.Fatal(err)
		}
		nums := map[string]int64{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if m := def.FindStringSubmatch(sc.Text()); m != nil {
				nums[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
			}
		}
		f.Close()
		table := fdSyscallsFor(arch)
		if len(table) != 25 || len(nums) < 250 {
			t.Fatalf("%s: %d fd system calls in gi's table, %d numbers in x/sys's", arch, len(table), len(nums))
		}
		for nr, sc := range table {
			name := "SYS_" + strings.ToUpper(sc.name)
			if want, ok := nums[name]; !ok || want != nr {
				t.Errorf("%s: gi has %s as %d, x/sys as %d (%v)", arch, sc.name, nr, want, ok)
			}
		}
	}
}
