// Package kernelgrid checks gi on the kernels Go services run on. Its test,
// TestKernels (make test-kernels, GI_TEST_KERNELS=1), boots Debian's kernel
// packages under qemu, emulated (TCG: nested KVM hangs): amd64 5.10, 6.1
// and 6.12, arm64 6.1 and 6.12. Each guest gets an initramfs holding gi, a
// static busybox, gi's own test binaries, the test targets prebuilt for
// its architecture (default, PIE, stripped; GI_TARGETS_PREBUILT) and the
// dynamic loader a PIE names, and its /init (init.sh) runs the checks: gi
// ps against the runtime's own dump (stripped targets too) and against what
// the waiters target says each goroutine waits on, gi trace against the
// known call trees of the tracee, and the gi command itself (trace-cli.sh:
// gi trace and gi ps --trace), whose warnings about missing kernel
// features must be those the kernel's release calls for. The results come back on the serial console; the
// test prints the grid and fails on any cell that is not ✓.
//
// fetch.sh installs qemu and downloads the kernels (bullseye,
// bookworm, bookworm-backports), busybox-static and libc6 of both
// architectures from the Debian archive this machine's apt uses, with a
// private apt state, into $XDG_CACHE_HOME/gi-kernels (else
// ~/.cache/gi-kernels; GI_KERNELS_CACHE overrides), once. GI_KERNELS
// (such as "5.10-amd64,6.1-arm64") boots a subset. Each guest's console is
// kept in bin/kernels/<kernel>-<arch>.log.
package kernelgrid
