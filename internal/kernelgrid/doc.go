// Package kernelgrid checks gi on the kernels Go services run on: its
// test (make test-kernels, GI_TEST_KERNELS=1) boots Debian's kernel
// packages under qemu (emulated: amd64 5.10, 6.1, 6.12; arm64 6.1, 6.12)
// with an initramfs holding gi, a static busybox, gi's own test binaries
// and prebuilt test targets (default and PIE), runs gi ps against the
// runtime's own dump and gi trace against known call trees inside each
// guest, and prints the grid. fetch.sh installs qemu and downloads the
// kernels, busybox and the dynamic loaders from the Debian archive this
// machine's apt uses.
package kernelgrid
