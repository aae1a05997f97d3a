// Package trace traces the functions of a running Go program with eBPF
// uprobes: it selects functions by pattern and decodes their probe sites
// (an entry past the stack-check prologue, every RET; Sites), loads gi's
// BPF programs and attaches them (Session: uprobe_multi links or perf
// events, attach cookies or addresses, growing while it runs with Add),
// reads the ring buffer into per-goroutine call trees (Builder, Run), and
// accumulates latency statistics (Stats, Histogram). What a probe captures
// of the arguments is planned from DWARF with package funcargs.
//
// It produces a model (calls, headers, symbols, a clock), never text:
// printing belongs to the command and to package report (JSON lines),
// exporting to package export.
package trace
