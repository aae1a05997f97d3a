//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// gi's uprobe programs. One program per probe kind, each attached to many
// addresses through one uprobe_multi link (one perf event per address on
// kernels before 6.6); the BPF cookie of a probe is an index into gi's own
// tables (bit 32 set: read g from TLS instead of the register that holds
// it in Go's register ABI), found by address on kernels before 5.15.
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
#define GI_IP(r) ((r)->ip)

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
#define GI_IP(r) ((r)->pc)

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
	__u8 pad;
	__u16 args_len; // bytes of captured arguments or results after the event
};

// Keeps struct event in BTF so bpf2go generates its Go twin.
const struct event *unused_event __attribute__((unused));

// Argument capture. A probe whose cookie names a plan (bits 33-63: plan
// index + 1) copies what the plan's operations say into a payload that
// follows its event: registers, stack slots, and bounded reads behind
// pointers found in the payload itself (string bytes, slice elements, an
// interface's type and data). gi decides the plan per function from DWARF
// and formats the payload in user space.
#define GI_COOKIE_PLAN_SHIFT 33
#define GI_ARG_OPS 32
#define GI_ARG_FILTERS 4
#define GI_ARG_BYTES 1024 // payload bound
#define GI_DEREF_MAX 512  // bytes one read behind a pointer copies at most
#define GI_FILTER_STR 32  // bytes of a string a filter compares
#define GI_REG_WORDS 34   // words of the largest struct pt_regs (arm64)

#define GI_OP_REG 1   // the register word reg, 8 bytes
#define GI_OP_STACK 2 // size bytes at sp+off
#define GI_OP_DEREF 3 // a count (8 bytes), then up to size bytes at [ptr]+off

struct arg_op {
	__u8 kind;
	__u8 reg;   // GI_OP_REG: index of the word in the probe's registers
	__u16 out;  // payload offset written
	__u16 size; // GI_OP_STACK: bytes; GI_OP_DEREF: bytes at most
	__u16 ptr;  // GI_OP_DEREF: payload offset of the pointer
	__u16 len;  // GI_OP_DEREF: payload offset of an element count; 0xffff: none
	__u16 elem; // GI_OP_DEREF: element size, times the count
	__s32 off;  // GI_OP_STACK: from sp; GI_OP_DEREF: added to the pointer
};

#define GI_CMP_EQ 1
#define GI_CMP_NE 2
#define GI_CMP_LT 3
#define GI_CMP_GT 4
#define GI_CMP_STR_EQ 5
#define GI_CMP_STR_NE 6
#define GI_CMP_STR_PREFIX 7

// One condition of a --where filter on a captured value.
struct arg_filter {
	__u8 cmp;       // GI_CMP_*
	__u8 size;      // integer: 1, 2, 4 or 8 bytes; string: bytes of str
	__u8 is_signed; // integer comparison signed
	__u8 pad;
	__u16 at;  // payload offset of the integer, or of a string's deref
	__u16 pad2;
	__s64 value;
	__u8 str[GI_FILTER_STR];
};

struct arg_plan {
	__u16 nops;
	__u16 size; // payload bytes
	__u8 nfilters;
	// On an entry plan: remember the calls that passed the filters; on a
	// return plan: emit only the returns of remembered calls.
	__u8 track;
	__u8 pad[2];
	struct arg_op ops[GI_ARG_OPS];
	struct arg_filter filters[GI_ARG_FILTERS];
};

// Keeps struct arg_plan in BTF so bpf2go generates its Go twin.
const struct arg_plan *unused_arg_plan __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); // set by gi: the number of plans
	__type(key, __u32);
	__type(value, struct arg_plan);
} plans SEC(".maps");

// An event with captured values: reserved in the ring buffer whole, so
// that the capture is private to the program run (a per-CPU buffer would
// be shared with a run preempting this one). User space reads args_len
// bytes of the payload; the rest is room the verifier's bounds need.
struct args_event {
	struct event ev;
	__u8 payload[GI_ARG_BYTES + GI_DEREF_MAX + 16];
	// A copy of the probed thread's struct pt_regs: its fields can be read
	// at constant offsets only, the plan's registers are chosen at run time.
	__u64 regs[GI_REG_WORDS];
};

_Static_assert(sizeof(struct gi_regs) <= GI_REG_WORDS * 8, "struct pt_regs does not fit args_event.regs");

// Keeps struct args_event in BTF so bpf2go generates its Go twin.
const struct args_event *unused_args_event __attribute__((unused));

// A call whose entry passed a filter, until its return: the goroutine and
// the distance of its frame from the top of the stack (which survives the
// stack being copied to grow).
struct call_key {
	__u64 goid;
	__u64 frame;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct call_key);
	__type(value, __u8);
} filtered_calls SEC(".maps");

// Set by gi before loading, from the target's DWARF or generated tables.
volatile const __u64 goid_offset = 152;
volatile const __u64 stack_hi_offset = 8;
volatile const __s64 g_tls_offset = -8;
volatile const __u64 gopc_offset = 0;        // 0: do not read
volatile const __u64 parent_goid_offset = 0; // 0: absent (Go < 1.21)
volatile const __u8 filter_goids = 0;
// Set by gi on kernels without BPF attach cookies (before 5.15): a probe
// then finds its cookie in the cookies map by the address it was hit at.
// The branch on it is resolved when the verifier loads the programs, so
// the helper an older kernel lacks is never seen there.
volatile const __u8 cookie_by_ip = 0;
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

// The cookie of each probe by its address in the traced processes (the
// link-time address plus the load bias of a PIE), when cookie_by_ip.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); // set by gi: the number of probes
	__type(key, __u64);
	__type(value, __u64);
} cookies SEC(".maps");

// probe_cookie returns the cookie of the probe that fired: the attach
// cookie, or on kernels without them the one gi stored for its address;
// false for an address gi did not store (another process's mapping).
static __always_inline int probe_cookie(struct gi_regs *regs, __u64 *cookie)
{
	if (!cookie_by_ip) {
		*cookie = bpf_get_attach_cookie(regs);
		return 1;
	}
	// The kernel sets the instruction pointer to the probed address
	// before it runs the probe's programs.
	__u64 ip = GI_IP(regs);
	__u64 *c = bpf_map_lookup_elem(&cookies, &ip);
	if (!c)
		return 0;
	*cookie = *c;
	return 1;
}

// capture runs a plan's operations into the payload; false if a filter
// rejects the call.
static __always_inline int capture(struct gi_regs *regs, struct arg_plan *plan, struct args_event *s)
{
	if (bpf_probe_read_kernel(s->regs, sizeof(*regs), regs) != 0)
		return 0;
	__u64 sp = GI_SP(regs);
	__u32 nops = plan->nops;
	for (__u32 i = 0; i < GI_ARG_OPS; i++) {
		if (i >= nops)
			break;
		struct arg_op *op = &plan->ops[i];
		__u32 out = op->out;
		if (out > GI_ARG_BYTES - 8)
			break;
		__u8 *dst = &s->payload[out];
		if (op->kind == GI_OP_REG) {
			__u32 r = op->reg;
			if (r >= GI_REG_WORDS)
				break;
			*(__u64 *)dst = s->regs[r];
		} else if (op->kind == GI_OP_STACK) {
			__u32 n = op->size;
			if (n > GI_DEREF_MAX)
				n = GI_DEREF_MAX;
			if (bpf_probe_read_user(dst, n, (void *)(sp + op->off)) != 0)
				__builtin_memset(dst, 0, 8);
		} else if (op->kind == GI_OP_DEREF) {
			__u32 p = op->ptr, l = op->len;
			if (p > GI_ARG_BYTES + GI_DEREF_MAX)
				break;
			__u64 ptr = *(__u64 *)&s->payload[p];
			__u64 n = op->size;
			if (l != 0xffff) {
				if (l > GI_ARG_BYTES + GI_DEREF_MAX)
					break;
				__u64 count = *(__u64 *)&s->payload[l];
				if (count < n / (op->elem ? op->elem : 1))
					n = count * op->elem;
			}
			if (n > GI_DEREF_MAX)
				n = GI_DEREF_MAX;
			if (!ptr)
				n = 0;
			if (n && bpf_probe_read_user(dst + 8, n, (void *)(ptr + op->off)) != 0) {
				// An object near the end of its mapping: try one word.
				n = n > 8 ? 8 : 0;
				if (n && bpf_probe_read_user(dst + 8, 8, (void *)(ptr + op->off)) != 0)
					n = 0;
			}
			*(__u64 *)dst = n;
		}
	}
	__u32 nf = plan->nfilters;
	for (__u32 i = 0; i < GI_ARG_FILTERS; i++) {
		if (i >= nf)
			break;
		struct arg_filter *f = &plan->filters[i];
		__u32 at = f->at;
		if (at > GI_ARG_BYTES - 8)
			return 0;
		if (f->cmp >= GI_CMP_STR_EQ) {
			__u64 n = *(__u64 *)&s->payload[at];
			__u32 want = f->size;
			if (want > GI_FILTER_STR)
				return 0;
			int same = f->cmp == GI_CMP_STR_PREFIX ? n >= want : n == want;
			for (__u32 j = 0; j < GI_FILTER_STR && same; j++) {
				if (j >= want)
					break;
				if (s->payload[at + 8 + j] != f->str[j])
					same = 0;
			}
			if (same == (f->cmp == GI_CMP_STR_NE))
				return 0;
			continue;
		}
		__u64 raw = *(__u64 *)&s->payload[at];
		__s64 v;
		switch (f->size) {
		case 1:
			v = f->is_signed ? (__s64)(__s8)raw : (__s64)(__u8)raw;
			break;
		case 2:
			v = f->is_signed ? (__s64)(__s16)raw : (__s64)(__u16)raw;
			break;
		case 4:
			v = f->is_signed ? (__s64)(__s32)raw : (__s64)(__u32)raw;
			break;
		default:
			v = (__s64)raw;
		}
		int ok;
		switch (f->cmp) {
		case GI_CMP_EQ:
			ok = v == f->value;
			break;
		case GI_CMP_NE:
			ok = v != f->value;
			break;
		case GI_CMP_LT:
			ok = f->is_signed ? v < f->value : (__u64)v < (__u64)f->value;
			break;
		case GI_CMP_GT:
			ok = f->is_signed ? v > f->value : (__u64)v > (__u64)f->value;
			break;
		default:
			ok = 0;
		}
		if (!ok)
			return 0;
	}
	return 1;
}

// emit reports one event of kind; with_args (a constant) says whether the
// probe may carry a capture plan: without, the verifier prunes capture.
static __always_inline int emit(struct gi_regs *regs, __u8 kind, __u64 cookie, int with_args)
{
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

	__u32 zero = 0;
	struct event *e;
	struct args_event *a = 0;
	struct arg_plan *plan = 0;
	__u32 plan_id = cookie >> GI_COOKIE_PLAN_SHIFT;
	if (with_args && plan_id) {
		plan_id--;
		plan = bpf_map_lookup_elem(&plans, &plan_id);
	}
	if (plan) {
		a = bpf_ringbuf_reserve(&events, sizeof(*a), 0);
		if (!a)
			goto lost;
		if (!capture(regs, plan, a)) {
			bpf_ringbuf_discard(a, BPF_RB_NO_WAKEUP);
			return 0;
		}
		if (plan->track) {
			struct call_key key = {.goid = goid, .frame = stack_hi - GI_SP(regs)};
			if (kind == GI_EVENT_ENTRY) {
				__u8 one = 1;
				bpf_map_update_elem(&filtered_calls, &key, &one, BPF_ANY);
			} else if (bpf_map_lookup_elem(&filtered_calls, &key)) {
				bpf_map_delete_elem(&filtered_calls, &key);
			} else {
				bpf_ringbuf_discard(a, BPF_RB_NO_WAKEUP);
				return 0;
			}
		}
		e = &a->ev;
	} else {
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e)
			goto lost;
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
	e->pad = 0;
	e->args_len = 0;
	if (plan) {
		__u32 size = plan->size;
		e->args_len = size > GI_ARG_BYTES ? GI_ARG_BYTES : size;
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
lost:;
	__u64 *n = bpf_map_lookup_elem(&lost, &zero);
	if (n)
		*n += 1;
	return 0;
}

SEC("uprobe.multi")
int gi_entry(struct gi_regs *regs)
{
	__u64 cookie;
	if (!probe_cookie(regs, &cookie))
		return 0;
	return emit(regs, GI_EVENT_ENTRY, cookie, 1);
}

SEC("uprobe.multi")
int gi_return(struct gi_regs *regs)
{
	__u64 cookie;
	if (!probe_cookie(regs, &cookie))
		return 0;
	return emit(regs, GI_EVENT_RETURN, cookie, 1);
}

// The entry of a function whose entry probe site is also one of its RETs
// (a leaf with no frame: "return p"). Two programs at one address run in
// an order the kernel does not promise, so one program reports both, entry
// first. The return's plan follows the entry's.
SEC("uprobe.multi")
int gi_entry_return(struct gi_regs *regs)
{
	__u64 cookie;
	if (!probe_cookie(regs, &cookie))
		return 0;
	emit(regs, GI_EVENT_ENTRY, cookie, 1);
	if (cookie >> GI_COOKIE_PLAN_SHIFT)
		cookie += 1ULL << GI_COOKIE_PLAN_SHIFT;
	return emit(regs, GI_EVENT_RETURN, cookie, 1);
}

SEC("uprobe.multi")
int gi_goexit(struct gi_regs *regs)
{
	__u64 cookie;
	if (!probe_cookie(regs, &cookie))
		return 0;
	return emit(regs, GI_EVENT_GOEXIT, cookie, 0);
}

// An empty program on the same probe points: the baseline of the per-call
// overhead benchmark.
SEC("uprobe.multi")
int gi_empty(struct gi_regs *regs)
{
	return 0;
}
