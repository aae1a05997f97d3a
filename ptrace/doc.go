// Package ptrace stops and resumes whole Linux processes and reads their
// memory.
//
// Every ptrace request is issued from one goroutine locked to one OS thread
// (the kernel ties a tracee to the thread that attached it), served through a
// channel: the pattern Delve uses. A process is stopped with PTRACE_SEIZE and
// PTRACE_INTERRUPT on every thread, repeated until no new thread appears, and
// resumed with PTRACE_DETACH, re-injecting any signal that arrived meanwhile.
// If the tracing process dies, the kernel detaches its tracees itself, so a
// killed gi never leaves its target stopped.
//
// Memory is read with process_vm_readv in batches, falling back to pread on
// /proc/<pid>/mem where the former is unavailable or a range fails.
package ptrace
