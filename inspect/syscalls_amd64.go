package inspect

// fdSyscalls are the Linux amd64 system calls whose first argument is the
// descriptor a goroutine blocked in them waits on, with their name and the
// side ("read" or "write", "" for neither).
var fdSyscalls = map[int64]struct{ name, dir string }{
	0: {"read", "read"}, 1: {"write", "write"}, 16: {"ioctl", ""}, 17: {"pread64", "read"}, 18: {"pwrite64", "write"},
	19: {"readv", "read"}, 20: {"writev", "write"}, 40: {"sendfile", "write"}, 42: {"connect", "write"}, 43: {"accept", "read"},
	44: {"sendto", "write"}, 45: {"recvfrom", "read"}, 46: {"sendmsg", "write"}, 47: {"recvmsg", "read"}, 72: {"fcntl", ""},
	73: {"flock", ""}, 74: {"fsync", "write"}, 75: {"fdatasync", "write"}, 77: {"ftruncate", "write"}, 217: {"getdents64", "read"},
	288: {"accept4", "read"}, 295: {"preadv", "read"}, 296: {"pwritev", "write"}, 299: {"recvmmsg", "read"}, 307: {"sendmmsg", "write"},
}
