package runtimelayout

// Facts of the runtime that gi's code depends on where no DWARF can give
// them: the probe-site decoder recognises the stack-check prologue before
// any layout is read, and a stripped binary has no DWARF. Each is checked
// against the DWARF of every Go release in the generated table
// (facts_test.go).
const (
	// GStackguard0 is the offset of g.stackguard0, which every function's
	// stack-check prologue compares the stack pointer with (g.stack is the
	// two words before it).
	GStackguard0 = 16
)
