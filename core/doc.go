// Package core reads an ELF core file of a Go process — the kernel's (a
// crash with GOTRACEBACK=crash, a signal), gdb's gcore — as one more kind
// of proc.Process: its memory from the core's segments, and from the
// executable where the core left file-backed pages out (code, read-only
// data); its executable, found through the core's own file mappings or
// given; its load bias from the core's auxiliary vector; and its threads
// with their registers from the NT_PRSTATUS notes, for inspect to decode
// as it decodes a live process stopped.
package core
