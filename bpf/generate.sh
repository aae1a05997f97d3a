#!/bin/sh
# Regenerates the bpf2go bindings from gi.bpf.c (run through `go generate`).
# Needs clang and llvm-strip (Debian: clang-19 llvm-19) and libbpf headers
# (libbpf-dev); BPF_CLANG and BPF_STRIP override the tools.
set -eu
cc=${BPF_CLANG:-clang-19}
strip=${BPF_STRIP:-llvm-strip-19}
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
exec go run github.com/cilium/ebpf/cmd/bpf2go -cc "$cc" -strip "$strip" \
	-cflags "-O2 -g -Wall -Werror -I/usr/include/$multiarch" \
	-target amd64,arm64 -type event -type arg_plan -type args_event -type held_calls -type prog_cost -type sample_window -type thread_cost -type sched_event gi gi.bpf.c
