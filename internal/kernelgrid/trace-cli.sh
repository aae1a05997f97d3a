#!/bin/sh
# The guest's gi command check: starts the PIE tracee, traces main.chain*
# with the gi command while the tracee makes two chain calls, and prints
# what gi said on stderr (the one-line warnings about missing kernel
# features among it) as GI-MESSAGE lines for the host; then runs gi ps
# --trace on it. Fails if gi exits non-zero, traces no call, gi ps --trace
# warns otherwise than gi trace, or the tracee is left stopped or traced.
fail() { echo "trace-cli: $*"; exit 1; }
mkfifo /tmp/tracee.in || fail "mkfifo"
/targets/tracee-local-pie </tmp/tracee.in >/tmp/tracee.out 2>&1 &
pid=$!
exec 3>/tmp/tracee.in
i=0
until grep -q '^READY' /tmp/tracee.out; do
	kill -0 $pid 2>/dev/null || { cat /tmp/tracee.out; fail "tracee exited before READY"; }
	i=$((i + 1))
	[ $i -gt 600 ] && fail "tracee not READY within 60s"
	sleep 0.1
done
# Traced whole: the warnings compared are the kernel features', and under
# emulation a burst of calls in the idle tracee costs it past the budget's
# floor (TestSamplingWindowsWork checks the windows here).
/gi trace --max-overhead none --duration 6s $pid 'main.chain*' >/tmp/trace.out 2>/tmp/trace.err &
gi=$!
i=0
until grep -q '^gi: tracing' /tmp/trace.err; do
	kill -0 $gi 2>/dev/null || break # gi failed: its exit code says so below
	i=$((i + 1))
	[ $i -gt 600 ] && { echo "trace-cli: gi trace did not attach within 60s"; break; }
	sleep 0.1
done
echo "chain 2" >&3
wait $gi
rc=$?
sed 's/^/GI-MESSAGE /' /tmp/trace.err
[ $rc -eq 0 ] || fail "gi trace exited with $rc"
n=$(grep -c 'main.chainA() {' /tmp/trace.out)
[ "$n" = 2 ] || { cat /tmp/trace.out; fail "$n chainA trees in gi's output, want 2"; }
# gi ps --trace (the link: the latency of the function each goroutine is
# in) attaches through the same kernel features and must warn as gi trace
# did.
/gi ps --max-overhead none --trace 2s $pid >/tmp/pstrace.out 2>/tmp/pstrace.err
rc=$?
[ $rc -eq 0 ] || { cat /tmp/pstrace.err; fail "gi ps --trace exited with $rc"; }
grep -q 'IN CALL' /tmp/pstrace.out || { cat /tmp/pstrace.out; fail "gi ps --trace printed no latency columns"; }
grep 'kernel lacks' /tmp/trace.err | sort >/tmp/trace.warn
grep 'kernel lacks' /tmp/pstrace.err | sort >/tmp/pstrace.warn
cmp -s /tmp/trace.warn /tmp/pstrace.warn || { cat /tmp/pstrace.err; fail "gi ps --trace did not warn as gi trace did"; }
grep -E '^(State|TracerPid):' /proc/$pid/status
state=$(awk '/^State:/ {print $2}' /proc/$pid/status)
case $state in
T | t | Z | X | "") fail "tracee left in state '$state'" ;;
esac
grep -q '^TracerPid:[[:space:]]*0$' /proc/$pid/status || fail "tracee left traced"
echo "chain 1" >&3
i=0
until [ "$(grep -c '^DONE' /tmp/tracee.out)" -ge 2 ]; do
	i=$((i + 1))
	[ $i -gt 300 ] && fail "tracee does not answer after the trace"
	sleep 0.1
done
kill $pid
exit 0
