package inspect

import "golang.org/x/sys/unix"

// fdSyscalls are the Linux arm64 system calls whose first argument is the
// descriptor a goroutine blocked in them waits on, with their name and the
// side ("read" or "write", "" for neither). ptrace finds the argument
// (Regs.Arg0) where the stop left it: x0, restored from orig_x0 for the
// call's restart.
var fdSyscalls = map[int64]struct{ name, dir string }{
	unix.SYS_READ: {"read", "read"}, unix.SYS_WRITE: {"write", "write"}, unix.SYS_IOCTL: {"ioctl", ""},
	unix.SYS_PREAD64: {"pread64", "read"}, unix.SYS_PWRITE64: {"pwrite64", "write"},
	unix.SYS_READV: {"readv", "read"}, unix.SYS_WRITEV: {"writev", "write"}, unix.SYS_SENDFILE: {"sendfile", "write"},
	unix.SYS_CONNECT: {"connect", "write"}, unix.SYS_ACCEPT: {"accept", "read"}, unix.SYS_SENDTO: {"sendto", "write"},
	unix.SYS_RECVFROM: {"recvfrom", "read"}, unix.SYS_SENDMSG: {"sendmsg", "write"}, unix.SYS_RECVMSG: {"recvmsg", "read"},
	unix.SYS_FCNTL: {"fcntl", ""}, unix.SYS_FLOCK: {"flock", ""}, unix.SYS_FSYNC: {"fsync", "write"},
	unix.SYS_FDATASYNC: {"fdatasync", "write"}, unix.SYS_FTRUNCATE: {"ftruncate", "write"},
	unix.SYS_GETDENTS64: {"getdents64", "read"}, unix.SYS_ACCEPT4: {"accept4", "read"},
	unix.SYS_PREADV: {"preadv", "read"}, unix.SYS_PWRITEV: {"pwritev", "write"},
	unix.SYS_RECVMMSG: {"recvmmsg", "read"}, unix.SYS_SENDMMSG: {"sendmmsg", "write"},
}
