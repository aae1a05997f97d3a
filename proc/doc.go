// Package proc reads a live Linux process through /proc and
// process_vm_readv, without stopping it: its memory (batched reads,
// falling back to pread on /proc/<pid>/mem where a range fails), the load
// bias of its executable, its clock, whether it is alive, its threads and
// their ids in its own PID namespace, its file descriptors and what they
// are, and finding a process by name or by its pid inside a container's
// namespace. Stopping and resuming it is package ptrace's; what its
// executable holds is package elfbin's.
package proc
