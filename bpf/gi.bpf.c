//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// gi's uprobe programs. One program per probe kind, each attached to many
// addresses through one uprobe_multi link; the BPF cookie of a probe is an
// index into gi's own tables (bit 32 set: read g from TLS instead of the
// register that holds it in Go's register ABI).
//
// Events go to a ring buffer without wakeups; user space drains it on a
// timer. Failed reservations are counted per CPU, never silently dropped.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define GI_EVENT_ENTRY 1
#define GI_EVENT_RETURN 2
#define GI_EVENT_GOEXIT 3

#define GI_COOKIE_TLS (1ULL << 32)

// The registers of the probed thread, as the kernel's struct pt_regs lays
// them out (uprobe programs receive a pointer to it).
#if defined(__TARGET_ARCH_x86)
struct gi_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};
#define GI_G(r) ((r)->r14)
#define GI_SP(r) ((r)->sp)

struct thread_struct {
	unsigned long fsbase;
} __attribute__((preserve_access_index));
struct task_struct {
	struct thread_struct thread;
} __attribute__((preserve_access_index));

static __always_inline __u64 thread_pointer(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	return BPF_CORE_READ(task, thread.fsbase);
}
#elif defined(__TARGET_ARCH_arm64)
struct gi_regs {
	__u64 regs[31];
	__u64 sp, pc, pstate;
};
#define GI_G(r) ((r)->regs[28])
#define GI_SP(r) ((r)->sp)

struct thread_struct {
	struct {
		unsigned long tp_value;
	} uw;
} __attribute__((preserve_access_index));
struct task_struct {
	struct thread_struct thread;
} __attribute__((preserve_access_index));

static __always_inline __u64 thread_pointer(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	return BPF_CORE_READ(task, thread.uw.tp_value);
}
#else
#error "unsupported target architecture"
#endif

// One event per probe hit.
struct event {
	__u64 ts;       // bpf_ktime_get_ns: CLOCK_MONOTONIC
	__u64 goid;
	__u64 g;        // address of the runtime.g
	__u64 sp;       // stack pointer at the probe
	__u64 stack_hi; // g.stack.hi: sp is compared relative to it
	__u64 caller;   // entry: the return address; else 0
	__u64 gopc;     // entry: g.gopc, the go statement that created it
	__u64 parent;   // entry: g.parentGoid (Go 1.21+), else 0
	__u32 cookie;   // index into gi's probe table
	__u32 pid;      // tgid, in gi's PID namespace when pidns_ino is set
	__u32 tid;      // likewise
	__u8 kind;      // GI_EVENT_*
	__u8 pad[3];
};

// Keeps struct event in BTF so bpf2go generates its Go twin.
const struct event *unused_event __attribute__((unused));

// Set by gi before loading, from the target's DWARF or generated tables.
volatile const __u64 goid_offset = 152;
volatile const __u64 stack_hi_offset = 8;
volatile const __s64 g_tls_offset = -8;
volatile const __u64 gopc_offset = 0;        // 0: do not read
volatile const __u64 parent_goid_offset = 0; // 0: absent (Go < 1.21)
volatile const __u8 filter_goids = 0;
// gi's PID namespace (st_dev and st_ino of /proc/self/ns/pid): process and
// thread ids are reported as gi sees them, also when gi runs inside a
// container's namespace. 0: report the kernel's (initial namespace) ids.
volatile const __u64 pidns_dev = 0;
volatile const __u64 pidns_ino = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

// Goroutine ids to trace when filter_goids is set.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} goids SEC(".maps");

static __always_inline int emit(struct gi_regs *regs, __u8 kind)
{
	__u64 cookie = bpf_get_attach_cookie(regs);
	__u64 g = 0;
	if (cookie & GI_COOKIE_TLS) {
		__u64 tp = thread_pointer();
		if (bpf_probe_read_user(&g, sizeof(g), (void *)(tp + g_tls_offset)) != 0)
			g = 0;
	} else {
		g = GI_G(regs);
	}
	__u64 goid = 0, stack_hi = 0;
	if (g) {
		bpf_probe_read_user(&goid, sizeof(goid), (void *)(g + goid_offset));
		bpf_probe_read_user(&stack_hi, sizeof(stack_hi), (void *)(g + stack_hi_offset));
	}
	if (filter_goids && !bpf_map_lookup_elem(&goids, &goid))
		return 0;

	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&lost, &zero);
		if (n)
			*n += 1;
		return 0;
	}
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	if (pidns_ino) {
		struct bpf_pidns_info ns = {};
		if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)) == 0) {
			pid = ns.tgid;
			tid = ns.pid;
		} else {
			pid = tid = 0; // not visible from gi's namespace
		}
	}
	e->ts = bpf_ktime_get_ns();
	e->goid = goid;
	e->g = g;
	e->sp = GI_SP(regs);
	e->stack_hi = stack_hi;
	e->caller = 0;
	e->gopc = 0;
	e->parent = 0;
	if (kind == GI_EVENT_ENTRY) {
		// Who created the goroutine never changes: carried with the event,
		// user space needs no racy read of a g that may be reused by then.
		if (g && gopc_offset)
			bpf_probe_read_user(&e->gopc, sizeof(e->gopc), (void *)(g + gopc_offset));
		if (g && parent_goid_offset)
			bpf_probe_read_user(&e->parent, sizeof(e->parent), (void *)(g + parent_goid_offset));
#if defined(__TARGET_ARCH_x86)
		// At the entry probe no frame is set up yet: [sp] is the return address.
		if (bpf_probe_read_user(&e->caller, sizeof(e->caller), (void *)e->sp) != 0)
			e->caller = 0;
#else
		e->caller = regs->regs[30];
#endif
	}
	e->cookie = (__u32)cookie;
	e->pid = pid;
	e->tid = tid;
	e->kind = kind;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("uprobe.multi")
int gi_entry(struct gi_regs *regs)
{
	return emit(regs, GI_EVENT_ENTRY);
}

SEC("uprobe.multi")
int gi_return(struct gi_regs *regs)
{
	return emit(regs, GI_EVENT_RETURN);
}

SEC("uprobe.multi")
int gi_goexit(struct gi_regs *regs)
{
	return emit(regs, GI_EVENT_GOEXIT);
}

// An empty program on the same probe points: the baseline of the per-call
// overhead benchmark.
SEC("uprobe.multi")
int gi_empty(struct gi_regs *regs)
{
	return 0;
}
