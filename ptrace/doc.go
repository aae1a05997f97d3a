// Package ptrace stops and resumes whole Linux processes, and reads the
// registers of their stopped threads.
//
// Every ptrace request is issued from one goroutine locked to one OS thread
// (the kernel ties a tracee to the thread that attached it), served through a
// channel: the pattern Delve uses. A process is stopped with PTRACE_SEIZE and
// PTRACE_INTERRUPT on every thread, repeated until no new thread appears, and
// resumed with PTRACE_DETACH, re-injecting any signal that arrived meanwhile.
// If the tracing process dies, the kernel detaches its tracees itself, so a
// killed gi never leaves its target stopped.
//
// What needs no stop (memory, threads, namespaces, clocks, descriptors) is
// read by package proc.
package ptrace
