package proc

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxEpollEntries bounds the registrations read from one epoll instance.
const maxEpollEntries = 1 << 20

// EpollRegistrations returns, for every epoll instance process pid holds,
// the data word of each registered file descriptor mapped to that
// descriptor (what the kernel reports in /proc/<pid>/fdinfo). The Go
// runtime stores its pollDesc there.
func EpollRegistrations(pid int) (map[uint64]int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	out := map[uint64]int{}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || link != "anon_inode:[eventpoll]" {
			continue
		}
		if err := readEpollInfo(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()), out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readEpollInfo parses the "tfd: N events: X data: D" lines of an epoll
// descriptor's fdinfo.
func readEpollInfo(path string, out map[uint64]int) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < maxEpollEntries; n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[0] != "tfd:" {
			continue
		}
		fd, err1 := strconv.Atoi(fields[1])
		var data uint64
		var err2 error = fmt.Errorf("no data")
		for i := 2; i+1 < len(fields); i++ {
			if fields[i] == "data:" {
				data, err2 = strconv.ParseUint(fields[i+1], 16, 64)
			}
		}
		if err1 == nil && err2 == nil {
			out[data] = fd
		}
	}
	return sc.Err()
}

// FD describes an open file descriptor of a process.
type FD struct {
	FD int
	// Kind is tcp, tcp6, udp, udp6, unix, pipe, file, or the kernel's own
	// word for other descriptors (anon_inode:..., socket).
	Kind string
	// Local and Remote are host:port for TCP and UDP sockets (Remote empty
	// for a listening or unconnected one), the path for a unix socket.
	Local, Remote string
	// Path is a file's path.
	Path string
}

// String renders "tcp 10.0.0.5:43122 → 10.0.0.9:5432 fd 7", "pipe fd 5",
// "file /var/log/x fd 4".
func (d FD) String() string {
	if d.Kind == "" {
		return fmt.Sprintf("fd %d", d.FD)
	}
	var b strings.Builder
	b.WriteString(d.Kind)
	switch {
	case d.Remote != "":
		fmt.Fprintf(&b, " %s → %s", d.Local, d.Remote)
	case d.Local != "":
		b.WriteString(" " + d.Local)
	case d.Path != "":
		b.WriteString(" " + d.Path)
	}
	fmt.Fprintf(&b, " fd %d", d.FD)
	return b.String()
}

// DescribeFD says what descriptor fd of process pid is: a socket with its
// addresses (from /proc/<pid>/net/*, the process's network namespace), a
// pipe or a file.
func DescribeFD(pid, fd int) (FD, error) {
	out := FD{FD: fd}
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		return out, fmt.Errorf("fd %d of process %d: %w", fd, pid, err)
	}
	switch {
	case strings.HasPrefix(link, "socket:["):
		ino := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
		out.Kind = "socket"
		for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
			if local, remote, ok := findInetSocket(pid, table, ino); ok {
				out.Kind, out.Local, out.Remote = table, local, remote
				return out, nil
			}
		}
		if path, ok := findUnixSocket(pid, ino); ok {
			out.Kind, out.Local = "unix", path
		}
	case strings.HasPrefix(link, "pipe:["):
		out.Kind = "pipe"
	case strings.HasPrefix(link, "/"):
		out.Kind, out.Path = "file", link
	default:
		out.Kind = link
	}
	return out, nil
}

// procNetEntry returns the fields of the line of /proc/<pid>/net/<table>
// whose inode column (0-based col) is inode.
func procNetEntry(pid int, table string, col int, inode string) ([]string, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > col && fs[col] == inode {
			return fs, true
		}
	}
	return nil, false
}

// findInetSocket looks inode up in /proc/<pid>/net/<table> (tcp, udp, ...).
func findInetSocket(pid int, table, inode string) (local, remote string, ok bool) {
	// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
	fs, ok := procNetEntry(pid, table, 9, inode)
	if !ok {
		return "", "", false
	}
	local = hexAddr(fs[1])
	if !strings.HasSuffix(fs[2], ":0000") {
		remote = hexAddr(fs[2])
	}
	return local, remote, true
}

// hexAddr decodes the kernel's "0100007F:1F90" (IPv4, or 32 hex digits of
// IPv6 in 32-bit little-endian words) into host:port.
func hexAddr(s string) string {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	port, err := strconv.ParseUint(p, 16, 16)
	raw, err2 := hex.DecodeString(h)
	if err != nil || err2 != nil || (len(raw) != 4 && len(raw) != 16) {
		return s
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 { // each 32-bit word is in host (little-endian) order
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10))
}

// findUnixSocket looks inode up in /proc/<pid>/net/unix: its path, or "@"
// for an unnamed one.
func findUnixSocket(pid int, inode string) (string, bool) {
	// Num RefCount Protocol Flags Type St Inode Path
	fs, ok := procNetEntry(pid, "unix", 6, inode)
	if !ok {
		return "", false
	}
	if len(fs) >= 8 {
		return fs[7], true
	}
	return "@", true
}
