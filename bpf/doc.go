// Package bpf holds gi's eBPF programs (gi.bpf.c) and the Go bindings that
// bpf2go generates from them. The generated files are committed, so building
// gi needs no clang; `make generate` rebuilds them.
package bpf

//go:generate ./generate.sh
