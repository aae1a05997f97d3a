#!/bin/busybox sh
# The guest's /init (a template: TestKernels puts the checks in place of
# the CHECKS line). Mounts what gi and its tests need, runs each check,
# prints the results on the console as GI-* lines for the host, and powers
# off. Nothing here may hang: the host kills the guest at its deadline.
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs root /root
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
ifconfig lo 127.0.0.1 up 2>/dev/null # the waiters target talks TCP to itself
echo "GI-KERNEL $(uname -r) $(uname -m) memlock=$(ulimit -l)"
# No gdb in the guest: the checks of what gdb reads of a core run on the host.
export GI_TEST_TOOLCHAINS=local GI_TARGETS_PREBUILT=/targets GI_REQUIRE_PRIVILEGED=1 GI_BINARY=/gi GI_WITHOUT_GDB=1
# Each check: "echo GI-BEGIN name; if command; then PASS; else FAIL; fi".
@CHECKS@
echo GI-DONE
poweroff -f
