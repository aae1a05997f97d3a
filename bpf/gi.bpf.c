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
// Scheduler events of goroutines with a traced call open (--why): the
// goroutine parks (a wait begins), is made ready (its wait ends), starts
// running on a thread, or is put back in a run queue while runnable
// (preempted, or yielding).
#define GI_EVENT_PARK 4
#define GI_EVENT_READY 5
#define GI_EVENT_RUN 6
#define GI_EVENT_YIELD 7
// It enters a system call (or a cgo call) and leaves it.
#define GI_EVENT_SYSCALL 8
#define GI_EVENT_SYSRET 9
// What it is about to wait on, before it parks: a semaphore's address
// (runtime.semacquire1: sync.Mutex, RWMutex, WaitGroup) or a network
// poller descriptor's fd (runtime.netpollblock).
#define GI_EVENT_SEMA 10
#define GI_EVENT_POLL 11

#define GI_COOKIE_TLS (1ULL << 32)
// A probe of a function traced in sampling windows (see sampled_keep).
#define GI_COOKIE_SAMPLED (1ULL << 63)
// A probe on an instruction the kernel single-steps (the dearer traps).
#define GI_COOKIE_STEPPED (1ULL << 62)
// A probe's generation (see probe_gen).
#define GI_COOKIE_GEN (1ULL << 61)
#define GI_COOKIE_PLAN_MASK ((1ULL << 28) - 1) // bits 33 to 60

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
#define GI_FREGS 16       // float registers a plan may read: X0-X15, V0-V15

#define GI_OP_REG 1   // the register word reg, 8 bytes
#define GI_OP_STACK 2 // size bytes at sp+off
#define GI_OP_DEREF 3 // a count (8 bytes), then up to size bytes at [ptr]+off
#define GI_OP_FREG 4  // the low 8 bytes of float register reg (see gi_signal)

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
	// fregs: the plan reads float registers (GI_OP_FREG), which a uprobe
	// program cannot: its event waits in held_calls for a signal, whose
	// frame the kernel writes with them, and fregs_at is the payload
	// offset of a word set to 1 once they are read.
	__u8 fregs;
	// resume_ret: the thread resumes at the return address after the
	// probe (a RET); else at the probe's address plus resume_off.
	__u8 resume_ret;
	__u16 fregs_at;
	__s32 resume_off;
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

// Calls whose plans read float registers, held by kernel thread id from
// their probe until the signal it sent reaches the thread (gi_signal): at
// most two, the entry and the return of gi_entry_return.
struct held_calls {
	__u64 resume_ip; // where the thread resumes after the probe
	__u64 probe_sp;  // its stack pointer at the probe
	__u32 n;
	__u32 plan[2];
	__u32 pad;
	struct args_event rec[2];
};

// Keeps struct held_calls in BTF so bpf2go generates its Go twin.
const struct held_calls *unused_held_calls __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); // set by gi when float_regs
	__type(key, __u32);
	__type(value, struct held_calls);
} held SEC(".maps");

// The value a thread's first held call is inserted with (a held_calls
// does not fit on the BPF stack).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct held_calls);
} held_template SEC(".maps");

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
// Set by gi when a plan reads float registers (GI_OP_FREG): every probe
// first releases the calls held for its thread, so that events keep their
// order, and gi_signal is attached to runtime.sigtrampgo, whose parameter
// ctx (the signal frame's ucontext) is in pt_regs word signal_ctx_word.
volatile const __u8 float_regs = 0;
volatile const __u32 signal_ctx_word = 0;
// Set by gi for --why: the scheduler probes (gi_sched) report what the
// goroutines with traced calls open do, read through these offsets of
// runtime.g, runtime.m, runtime.gobuf and runtime.sudog.
volatile const __u8 why = 0;
volatile const __u64 g_m_offset = 0;
volatile const __u64 m_curg_offset = 0;
volatile const __u64 g_waitreason_offset = 0;
volatile const __u64 g_sched_bp_offset = 0;
volatile const __u64 g_waiting_offset = 0; // 0: do not read
volatile const __u64 sudog_c_offset = 0;
volatile const __u64 polldesc_fd_offset = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} events SEC(".maps");

// Per CPU: [0] events the ring buffer had no room for; [1] held calls
// released without their float registers (the signal did not come, or
// came elsewhere); [2] signals sent to read float registers.
#define GI_LOST_EVENTS 0
#define GI_LOST_FREGS 1
#define GI_SENT_SIGNALS 2
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

// bump adds one to the counter at key of map, a per-CPU array of them.
static __always_inline void bump(void *map, __u32 key)
{
	__u64 *n = bpf_map_lookup_elem(map, &key);
	if (n)
		*n += 1;
}

static __always_inline void count_lost(__u32 what)
{
	bump(&lost, what);
}

// What the probes cost the traced process, for the overhead gi measures
// and bounds: hits counts each probe's hits by its index (every hit, the
// filtered ones too: the trap costs the target either way); cost sums,
// per program kind, its runs and the nanoseconds spent in it.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1); // set by gi: the number of probes
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

#define GI_COST_ENTRY 0
#define GI_COST_RETURN 1
#define GI_COST_ENTRY_RETURN 2
#define GI_COST_GOEXIT 3
#define GI_COST_SIGNAL 4
#define GI_COST_SCHED 5
#define GI_COST_KINDS 6
struct prog_cost {
	__u64 runs;
	__u64 ns;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GI_COST_KINDS);
	__type(key, __u32);
	__type(value, struct prog_cost);
} cost SEC(".maps");

// Per thread (its id in gi's PID namespace): hits on emulated and on
// single-stepped instructions, and the nanoseconds spent in programs. A
// probe's cost falls on the thread that hits it: gi bounds the slowdown
// of the thread probes slow most.
struct thread_cost {
	__u64 emulated;
	__u64 stepped;
	__u64 ns;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct thread_cost);
} thread_costs SEC(".maps");

// The same sums over every hit of the probes of functions traced whole
// (and of the goroutine-exit probe while it is), whatever the thread: one
// counter gi reads every few milliseconds to see, long before it reads
// hits again, that a function traced whole has turned hot.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct thread_cost);
} whole_cost SEC(".maps");

// count_hit counts a hit of the probe with cookie.
static __always_inline void count_hit(__u64 cookie)
{
	bump(&hits, (__u32)cookie);
}

// The generation whose cookies report, per probe (by index). gi takes a
// function's probes out of a uprobe_multi link by attaching a link of the
// others whose cookies carry the other generation (GI_COOKIE_GEN), then
// flipping theirs here, then closing the old link: for a moment both links
// fire at those probes, and exactly one reports each hit.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); // set by gi: the number of probes
	__type(key, __u32);
	__type(value, __u8);
} probe_gen SEC(".maps");

// account adds one run of a program of kind, begun at start, at a probe
// with cookie, to cost and thread_cost.
static __always_inline void account(__u32 kind, __u64 start, __u64 cookie)
{
	__u64 ns = bpf_ktime_get_ns() - start;
	struct prog_cost *c = bpf_map_lookup_elem(&cost, &kind);
	if (c) {
		c->runs += 1;
		c->ns += ns;
	}
	if (kind <= GI_COST_GOEXIT && !(cookie & GI_COOKIE_SAMPLED)) {
		__u32 zero = 0;
		struct thread_cost *w = bpf_map_lookup_elem(&whole_cost, &zero);
		if (w) {
			if (cookie & GI_COOKIE_STEPPED)
				w->stepped += 1;
			else
				w->emulated += 1;
			w->ns += ns;
		}
	}
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	if (pidns_ino) {
		struct bpf_pidns_info ns_ids = {};
		if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns_ids, sizeof(ns_ids)) != 0)
			return;
		tid = ns_ids.pid;
	}
	struct thread_cost *t = bpf_map_lookup_elem(&thread_costs, &tid);
	if (!t) {
		struct thread_cost zero = {};
		bpf_map_update_elem(&thread_costs, &tid, &zero, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&thread_costs, &tid);
		if (!t)
			return;
	}
	// A thread runs on one CPU at a time: no other program updates its
	// record meanwhile.
	if (cookie & GI_COOKIE_STEPPED)
		t->stepped += 1;
	else
		t->emulated += 1;
	t->ns += ns;
}

// The sampling window of the functions traced in windows, set by gi: their
// probes are attached for a window and detached after it. While it is
// open their calls are reported; while it closes, only those made inside
// a reported call still open on their goroutine, and the returns of
// reported calls: a sampled call is reported whole or not at all. id
// numbers the windows: what an earlier one left is ignored.
#define GI_WINDOW_OPEN 0
#define GI_WINDOW_CLOSING 1
struct sample_window {
	__u32 state;
	__u32 id;
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_window);
} window SEC(".maps");

// The sampled calls reported and not returned, by goroutine and frame
// (the value: their window's id), and per goroutine how many of the
// current window are open.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct call_key);
	__type(value, __u32);
} sampled_calls SEC(".maps");

struct open_count {
	__u32 id;
	__u32 n;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct open_count);
} sampled_open SEC(".maps");

// Per CPU: [0] sampled calls reported, [1] their returns reported: gi
// knows when a closing window's calls have all returned.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} sampled_count SEC(".maps");

// sampled_keep decides whether an entry or return at the probe with
// cookie is reported: always for a function traced whole; by the window
// for a sampled one (see window), keeping the books of its open calls.
// The cookie is tested in here: a branch on it in emit would have the
// verifier walk what follows once for each outcome.
static __noinline int sampled_keep(__u64 cookie, __u8 kind, __u64 goid, __u64 frame)
{
	if (!(cookie & GI_COOKIE_SAMPLED))
		return 1;
	__u32 zero = 0;
	struct sample_window *w = bpf_map_lookup_elem(&window, &zero);
	if (!w)
		return 0;
	__u32 id = w->id;
	struct call_key key = {.goid = goid, .frame = frame};
	struct open_count *open = bpf_map_lookup_elem(&sampled_open, &goid);
	int mine = open && open->id == id;
	if (kind == GI_EVENT_ENTRY) {
		if (w->state == GI_WINDOW_CLOSING && !(mine && open->n > 0))
			return 0;
		if (bpf_map_update_elem(&sampled_calls, &key, &id, BPF_ANY) != 0)
			return 0;
		if (mine) {
			__sync_fetch_and_add(&open->n, 1);
		} else {
			struct open_count one = {.id = id, .n = 1};
			bpf_map_update_elem(&sampled_open, &goid, &one, BPF_ANY);
		}
		bump(&sampled_count, 0);
		return 1;
	}
	__u32 *at = bpf_map_lookup_elem(&sampled_calls, &key);
	if (!at)
		return 0;
	int current = *at == id;
	bpf_map_delete_elem(&sampled_calls, &key);
	if (!current)
		return 0;
	if (mine && open->n > 0)
		__sync_fetch_and_add(&open->n, (__u32)-1);
	bump(&sampled_count, 1);
	return 1;
}

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

// live_cookie reads the cookie of the probe that fired, and says whether
// it is of the generation that reports (see probe_gen).
static __always_inline int live_cookie(struct gi_regs *regs, __u64 *cookie)
{
	if (!probe_cookie(regs, cookie))
		return 0;
	__u32 idx = (__u32)*cookie;
	__u8 *gen = bpf_map_lookup_elem(&probe_gen, &idx);
	__u8 live = gen ? *gen : 0;
	return ((*cookie & GI_COOKIE_GEN) != 0) == (live != 0);
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
		} else if (op->kind == GI_OP_FREG) {
			*(__u64 *)dst = 0; // filled by gi_signal
		}
	}
	if (plan->fregs) {
		__u32 at = plan->fregs_at;
		if (at > GI_ARG_BYTES - 8)
			return 0;
		*(__u64 *)&s->payload[at] = 0;
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

// output_held writes the calls h holds to the ring buffer, in order.
static __always_inline void output_held(struct held_calls *h)
{
	for (__u32 i = 0; i < 2; i++) {
		if (i >= h->n)
			break;
		struct args_event *a = &h->rec[i];
		__u32 len = a->ev.args_len;
		if (len > GI_ARG_BYTES)
			len = GI_ARG_BYTES;
		if (bpf_ringbuf_output(&events, a, sizeof(struct event) + len, BPF_RB_NO_WAKEUP) != 0)
			count_lost(GI_LOST_EVENTS);
	}
	h->n = 0;
}

// release_held writes the calls held for thread ktid without their float
// registers: a later probe on the thread, or a failed signal, comes first.
static __noinline void release_held(__u32 ktid)
{
	struct held_calls *h = bpf_map_lookup_elem(&held, &ktid);
	if (!h)
		return;
	if (h->n) {
		count_lost(GI_LOST_FREGS);
		output_held(h);
	}
	bpf_map_delete_elem(&held, &ktid);
}

// keep_call applies a filtered function's tracking (arg_plan.track):
// false to drop a return whose entry did not pass the filters.
static __always_inline int keep_call(struct arg_plan *plan, __u8 kind, __u64 goid, __u64 stack_hi, __u64 sp)
{
	if (!plan->track)
		return 1;
	struct call_key key = {.goid = goid, .frame = stack_hi - sp};
	if (kind == GI_EVENT_ENTRY) {
		__u8 one = 1;
		bpf_map_update_elem(&filtered_calls, &key, &one, BPF_ANY);
		return 1;
	}
	if (bpf_map_lookup_elem(&filtered_calls, &key)) {
		bpf_map_delete_elem(&filtered_calls, &key);
		return 1;
	}
	return 0;
}

// current_ids returns the current process and thread ids, as gi's PID
// namespace numbers them (0 if not visible from it).
static __always_inline void current_ids(__u32 *pid, __u32 *tid)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	*pid = pid_tgid >> 32;
	*tid = (__u32)pid_tgid;
	if (pidns_ino) {
		struct bpf_pidns_info ns = {};
		if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)) == 0) {
			*pid = ns.tgid;
			*tid = ns.pid;
		} else {
			*pid = *tid = 0; // not visible from gi's namespace
		}
	}
}

// fill_event writes the fields of an event of kind.
static __always_inline void fill_event(struct event *e, struct gi_regs *regs, __u8 kind, __u64 cookie,
				       __u64 g, __u64 goid, __u64 stack_hi, struct arg_plan *plan)
{
	__u32 pid, tid;
	current_ids(&pid, &tid);
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
}

// return_address is where a RET at regs returns to.
static __always_inline __u64 return_address(struct gi_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	__u64 ra = 0;
	bpf_probe_read_user(&ra, sizeof(ra), (void *)GI_SP(regs));
	return ra;
#else
	return regs->regs[30];
#endif
}

#define GI_SIGURG 23 // the same on amd64 and arm64
#define GI_NO_PLAN 0xffffffff // held_calls.plan of a call held without one

// hold moves event e, just captured into the ring buffer, to the calls
// held for thread ktid. One whose plan reads float registers has the
// kernel send the thread SIGURG: the signal is delivered as soon as the
// probed instruction has run, before any other instruction of the thread,
// and the kernel writes the float registers into the signal frame, where
// gi_signal reads them. The Go runtime sends SIGURG itself to preempt
// goroutines, and its handler does nothing for one that asks nothing. A
// call that reads none is held only behind its entry (the return of
// gi_entry_return), which set where the thread resumes and sent the
// signal. The caller discards e: a call is captured into the ring buffer
// and copied from there, so that the capture, the bulk of what the
// verifier walks, is walked once per program (capturing into the held
// calls too walked it twice, and into a map value costs the verifier four
// times as much: 494,554 instructions for gi_entry_return, half its limit).
static __always_inline void hold(struct gi_regs *regs, struct event *e, struct arg_plan *plan, __u32 plan_id, __u32 ktid)
{
	struct held_calls *h = bpf_map_lookup_elem(&held, &ktid);
	if (!h) {
		__u32 zero = 0;
		struct held_calls *t = bpf_map_lookup_elem(&held_template, &zero);
		if (!t)
			return;
		if (bpf_map_update_elem(&held, &ktid, t, BPF_ANY) != 0) {
			count_lost(GI_LOST_EVENTS);
			return;
		}
		h = bpf_map_lookup_elem(&held, &ktid);
		if (!h)
			return;
		h->n = 0;
	}
	__u32 i = h->n;
	if (i > 1)
		return;
	__u32 size = e->args_len;
	if (size > GI_ARG_BYTES)
		size = GI_ARG_BYTES;
	if (bpf_probe_read_kernel(&h->rec[i], sizeof(struct event) + size, e) != 0) {
		if (i == 0)
			bpf_map_delete_elem(&held, &ktid);
		count_lost(GI_LOST_EVENTS);
		return;
	}
	int reads = plan && plan->fregs;
	h->plan[i] = reads ? plan_id : GI_NO_PLAN;
	if (reads) {
		h->resume_ip = plan->resume_ret ? return_address(regs) : GI_IP(regs) + plan->resume_off;
		h->probe_sp = GI_SP(regs);
	}
	h->n = i + 1;
	if (reads) {
		if (bpf_send_signal_thread(GI_SIGURG) != 0)
			release_held(ktid);
		else
			count_lost(GI_SENT_SIGNALS);
	}
}

// current_g returns the g running on the probed thread: from the register
// Go's ABI keeps it in, or from thread-local storage (GI_COOKIE_TLS).
static __always_inline __u64 current_g(struct gi_regs *regs, __u64 cookie)
{
	// The register is read whatever the cookie says: a read on one branch
	// only lets the compiler select between pointers to it and to the
	// stack, and the verifier refuses a modified pointer to the context.
	__u64 g = GI_G(regs);
	if (cookie & GI_COOKIE_TLS) {
		__u64 tp = thread_pointer(), t = 0;
		if (bpf_probe_read_user(&t, sizeof(t), (void *)(tp + g_tls_offset)) != 0)
			t = 0;
		g = t;
	}
	return g;
}

// Goroutines with reported calls open, and how many (--why): the
// scheduler probes report their events only.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u32);
} why_goids SEC(".maps");

// why_mark keeps why_goids: a reported entry opens a call of goroutine
// goid, its return closes it, the goroutine's exit closes them all.
static __noinline void why_mark(__u8 kind, __u64 goid)
{
	__u32 *n = bpf_map_lookup_elem(&why_goids, &goid);
	if (kind == GI_EVENT_ENTRY) {
		if (n) {
			__sync_fetch_and_add(n, 1);
		} else {
			__u32 one = 1;
			bpf_map_update_elem(&why_goids, &goid, &one, BPF_ANY);
		}
	} else if (n && (kind == GI_EVENT_GOEXIT || *n <= 1)) {
		bpf_map_delete_elem(&why_goids, &goid);
	} else if (n) {
		__sync_fetch_and_add(n, (__u32)-1);
	}
}

// emit reports one event of kind; with_args (a constant) says whether the
// probe may carry a capture plan: without, the verifier prunes capture.
// second (a constant) marks the return of gi_entry_return, reported by the
// program run that just reported the entry. gated (a constant) applies a
// sampling window's rules to a sampled function's probe (sampled_keep).
static __always_inline int emit(struct gi_regs *regs, __u8 kind, __u64 cookie, int with_args, int second, int gated)
{
	__u64 g = current_g(regs, cookie);
	__u64 goid = 0, stack_hi = 0;
	if (g) {
		bpf_probe_read_user(&goid, sizeof(goid), (void *)(g + goid_offset));
		bpf_probe_read_user(&stack_hi, sizeof(stack_hi), (void *)(g + stack_hi_offset));
	}
	if (filter_goids && !bpf_map_lookup_elem(&goids, &goid))
		return 0;

	__u32 ktid = (__u32)bpf_get_current_pid_tgid();
	if (float_regs && !second)
		release_held(ktid);

	struct event *e;
	struct args_event *a = 0;
	struct arg_plan *plan = 0;
	__u32 plan_id = (cookie >> GI_COOKIE_PLAN_SHIFT) & GI_COOKIE_PLAN_MASK;
	if (with_args && plan_id) {
		plan_id--;
		plan = bpf_map_lookup_elem(&plans, &plan_id);
	}
	if (plan) {
		a = bpf_ringbuf_reserve(&events, sizeof(*a), 0);
		if (!a)
			goto lost;
		if (!capture(regs, plan, a) || (gated && !sampled_keep(cookie, kind, goid, stack_hi - GI_SP(regs))) ||
		    !keep_call(plan, kind, goid, stack_hi, GI_SP(regs))) {
			bpf_ringbuf_discard(a, BPF_RB_NO_WAKEUP);
			return 0;
		}
		e = &a->ev;
	} else {
		if (gated && !sampled_keep(cookie, kind, goid, stack_hi - GI_SP(regs)))
			return 0;
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e)
			goto lost;
	}
	fill_event(e, regs, kind, cookie, g, goid, stack_hi, plan);
	if (why)
		why_mark(kind, goid);
	// A call whose plan reads float registers is held (see hold); so is
	// the return of gi_entry_return whose entry was just held, behind it,
	// to keep the order. Decided after the capture: a branch before it
	// would have the verifier walk the capture once for each side.
	if (float_regs) {
		int held_call = plan && plan->fregs;
		if (!held_call && second) {
			struct held_calls *h = bpf_map_lookup_elem(&held, &ktid);
			held_call = h && h->n == 1;
		}
		if (held_call) {
			hold(regs, e, plan, plan_id, ktid);
			bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
			return 0;
		}
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
lost:
	count_lost(GI_LOST_EVENTS);
	return 0;
}

// report is a program that reports one event of kind per hit, counting
// the hit and accounting its cost as program cost_kind; with_args and
// gated (constants) are emit's.
static __always_inline int report(struct gi_regs *regs, __u8 kind, __u32 cost_kind, int with_args, int gated)
{
	__u64 start = bpf_ktime_get_ns(), cookie;
	if (!live_cookie(regs, &cookie))
		return 0;
	count_hit(cookie);
	emit(regs, kind, cookie, with_args, 0, gated);
	account(cost_kind, start, cookie);
	return 0;
}

SEC("uprobe.multi")
int gi_entry(struct gi_regs *regs)
{
	return report(regs, GI_EVENT_ENTRY, GI_COST_ENTRY, 1, 1);
}

SEC("uprobe.multi")
int gi_return(struct gi_regs *regs)
{
	return report(regs, GI_EVENT_RETURN, GI_COST_RETURN, 1, 1);
}

// The entry of a function whose entry probe site is also one of its RETs
// (a leaf with no frame: "return p"). Two programs at one address run in
// an order the kernel does not promise, so one program reports both, entry
// first. The return's plan follows the entry's.
SEC("uprobe.multi")
int gi_entry_return(struct gi_regs *regs)
{
	__u64 start = bpf_ktime_get_ns(), cookie;
	if (!live_cookie(regs, &cookie))
		return 0;
	count_hit(cookie);
	// A sampled leaf's entry and return, at one instant, make a whole
	// call by themselves: no window books (gated 0).
	emit(regs, GI_EVENT_ENTRY, cookie, 1, 0, 0);
	if ((cookie >> GI_COOKIE_PLAN_SHIFT) & GI_COOKIE_PLAN_MASK)
		cookie += 1ULL << GI_COOKIE_PLAN_SHIFT;
	emit(regs, GI_EVENT_RETURN, cookie, 1, 1, 0);
	account(GI_COST_ENTRY_RETURN, start, cookie);
	return 0;
}

// The kernel's signal frame, where gi_signal finds the interrupted
// thread's registers: offsets in struct ucontext (uapi asm/ucontext.h and
// asm/sigcontext.h), the same on every kernel of an architecture.
#if defined(__TARGET_ARCH_x86)
#define GI_UC_IP 168      // uc_mcontext.ip
#define GI_UC_SP 160      // uc_mcontext.sp
#define GI_UC_FPSTATE 224 // uc_mcontext.fpstate: pointer to the fxsave image
#define GI_FX_XMM 160     // fxsave image: xmm_space, 16 bytes a register
#else
#define GI_UC_IP 440            // uc_mcontext.pc
#define GI_UC_SP 432            // uc_mcontext.sp
#define GI_UC_FPSIMD 464        // uc_mcontext.__reserved: fpsimd_context first
#define GI_FPSIMD_MAGIC 0x46508001
#define GI_FPSIMD_VREGS 16      // fpsimd_context.vregs, 16 bytes a register
#endif

// float_registers returns the address of float register 0 in the signal
// frame whose ucontext is at ctx (register i is 16 bytes further each),
// with the interrupted thread's ip and sp; 0 if the frame does not read.
static __always_inline __u64 float_registers(__u64 ctx, __u64 *ip, __u64 *sp)
{
	if (bpf_probe_read_user(ip, sizeof(*ip), (void *)(ctx + GI_UC_IP)) != 0 ||
	    bpf_probe_read_user(sp, sizeof(*sp), (void *)(ctx + GI_UC_SP)) != 0)
		return 0;
#if defined(__TARGET_ARCH_x86)
	__u64 fx = 0;
	if (bpf_probe_read_user(&fx, sizeof(fx), (void *)(ctx + GI_UC_FPSTATE)) != 0 || !fx)
		return 0;
	return fx + GI_FX_XMM;
#else
	__u32 magic = 0;
	if (bpf_probe_read_user(&magic, sizeof(magic), (void *)(ctx + GI_UC_FPSIMD)) != 0 || magic != GI_FPSIMD_MAGIC)
		return 0;
	return ctx + GI_UC_FPSIMD + GI_FPSIMD_VREGS;
#endif
}

// read_fregs fills the float registers of a held call from the signal
// frame (fregs: the address of register 0 there); false if one fails.
static __always_inline int read_fregs(struct args_event *a, struct arg_plan *plan, __u64 fregs)
{
	__u32 nops = plan->nops;
	for (__u32 i = 0; i < GI_ARG_OPS; i++) {
		if (i >= nops)
			break;
		struct arg_op *op = &plan->ops[i];
		if (op->kind != GI_OP_FREG)
			continue;
		__u32 out = op->out, r = op->reg;
		if (out > GI_ARG_BYTES - 8 || r >= GI_FREGS)
			return 0;
		if (bpf_probe_read_user(&a->payload[out], 8, (void *)(fregs + 16 * r)) != 0)
			return 0;
	}
	__u32 at = plan->fregs_at;
	if (at > GI_ARG_BYTES - 8)
		return 0;
	*(__u64 *)&a->payload[at] = 1;
	return 1;
}

// The entry of runtime.sigtrampgo, where every signal of a Go thread
// arrives: for a thread with held calls, their float registers are read
// from the signal frame, if the thread was interrupted where the probe
// left it, and the calls are reported.
SEC("uprobe.multi")
int gi_signal(struct gi_regs *regs)
{
	__u64 start = bpf_ktime_get_ns();
	__u32 ktid = (__u32)bpf_get_current_pid_tgid();
	struct held_calls *h = bpf_map_lookup_elem(&held, &ktid);
	if (!h) {
		account(GI_COST_SIGNAL, start, GI_COOKIE_STEPPED);
		return 0;
	}
	__u64 ctx = 0, ip = 0, sp = 0, fregs = 0;
	__u32 w = signal_ctx_word;
	if (w < GI_REG_WORDS && bpf_probe_read_kernel(&ctx, sizeof(ctx), (__u64 *)regs + w) == 0 && ctx)
		fregs = float_registers(ctx, &ip, &sp);
	// Interrupted right after the probe: the resume address, and a stack
	// pointer that moved at most by the probed instruction (a push, or
	// the frame an arm64 store with writeback allocates).
	int here = fregs && ip == h->resume_ip && sp <= h->probe_sp + 8 && sp + 65536 >= h->probe_sp;
	for (__u32 i = 0; i < 2; i++) {
		if (i >= h->n)
			break;
		__u32 plan_id = h->plan[i];
		if (plan_id == GI_NO_PLAN)
			continue;
		struct arg_plan *plan = bpf_map_lookup_elem(&plans, &plan_id);
		if (!here || !plan || !read_fregs(&h->rec[i], plan, fregs))
			count_lost(GI_LOST_FREGS);
	}
	output_held(h);
	bpf_map_delete_elem(&held, &ktid);
	account(GI_COST_SIGNAL, start, GI_COOKIE_STEPPED);
	return 0;
}

SEC("uprobe.multi")
int gi_goexit(struct gi_regs *regs)
{
	return report(regs, GI_EVENT_GOEXIT, GI_COST_GOEXIT, 0, 0);
}

// Counts the hits of the probes it is attached at, and nothing else: the
// window in which gi estimates each function's call rate.
SEC("uprobe.multi")
int gi_count(struct gi_regs *regs)
{
	__u64 cookie;
	if (probe_cookie(regs, &cookie))
		count_hit(cookie);
	return 0;
}

// A scheduler event, with the return addresses of the goroutine it
// concerns (a park: the parked one; a ready: the one that made it ready).
#define GI_FRAMES 12
struct sched_event {
	struct event ev;
	__u64 pcs[GI_FRAMES];
};

// Keeps struct sched_event in BTF so bpf2go generates its Go twin.
const struct sched_event *unused_sched_event __attribute__((unused));

// first_arg is the first integer argument of a Go function (ABIInternal)
// at its entry.
static __always_inline __u64 first_arg(struct gi_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	return regs->ax;
#else
	return regs->regs[0];
#endif
}

// walk_frames follows the frame-pointer chain from fp (a saved frame
// pointer: the caller's at [fp], the return address at [fp+8] on both
// architectures) up the stack into pcs; it returns how many it read.
static __always_inline __u32 walk_frames(__u64 fp, __u64 *pcs)
{
	__u32 n = 0;
	for (__u32 i = 0; i < GI_FRAMES; i++) {
		__u64 fr[2];
		if (!fp || bpf_probe_read_user(fr, sizeof(fr), (void *)fp) != 0 || !fr[1])
			break;
		pcs[i] = fr[1];
		n = i + 1;
		if (fr[0] <= fp) // frames go up the stack: anything else ends it
			break;
		fp = fr[0];
	}
	return n;
}

// The scheduler's functions that move a goroutine between states, each
// with the goroutine (its g) as first argument: runtime.park_m (it parks,
// after gopark set g.waitreason), runtime.ready (a wait ends: on the
// system stack of the thread of the goroutine that ended it, or of the
// scheduler, for a timer), runtime.execute (it runs) and
// runtime.goschedImpl and runtime.goyield_m (it is preempted or yields);
// and functions the goroutine runs itself (the g register's): it enters
// and leaves system calls (runtime.reentersyscall,
// runtime.entersyscallblock, runtime.exitsyscall) and is about to wait on
// a semaphore (runtime.semacquire1, its address first) or a descriptor
// (runtime.netpollblock, its pollDesc first). The event kind is in the
// cookie's plan bits. Only goroutines with a traced call open are
// reported; every hit is counted.
SEC("uprobe.multi")
int gi_sched(struct gi_regs *regs)
{
	__u64 start = bpf_ktime_get_ns(), cookie;
	if (!probe_cookie(regs, &cookie))
		return 0;
	count_hit(cookie);
	__u8 kind = (cookie >> GI_COOKIE_PLAN_SHIFT) & 0xff;
	int own = kind >= GI_EVENT_SYSCALL;
	__u64 gp = own ? current_g(regs, cookie) : first_arg(regs), goid = 0;
	if (!gp || bpf_probe_read_user(&goid, sizeof(goid), (void *)(gp + goid_offset)) != 0 ||
	    !bpf_map_lookup_elem(&why_goids, &goid)) {
		account(GI_COST_SCHED, start, cookie);
		return 0;
	}
	struct sched_event *s = bpf_ringbuf_reserve(&events, sizeof(*s), 0);
	if (!s) {
		count_lost(GI_LOST_EVENTS);
		account(GI_COST_SCHED, start, cookie);
		return 0;
	}
	struct event *e = &s->ev;
	__u32 pid, tid;
	current_ids(&pid, &tid);
	e->ts = bpf_ktime_get_ns();
	e->goid = goid;
	e->g = gp;
	e->sp = 0;
	e->stack_hi = 0;
	e->caller = 0; // ready: the goroutine that made it ready, 0 if none
	e->gopc = 0;   // park: the channel of its first sudog; sema: the address; poll: the fd
	e->parent = 0; // park: the wait reason
	e->cookie = (__u32)cookie;
	e->pid = pid;
	e->tid = tid;
	e->kind = kind;
	e->pad = 0;
	__u64 fp = 0;
	if (kind == GI_EVENT_PARK) {
		__u8 reason = 0;
		bpf_probe_read_user(&reason, sizeof(reason), (void *)(gp + g_waitreason_offset));
		e->parent = reason;
		__u64 sg = 0;
		if (g_waiting_offset && bpf_probe_read_user(&sg, sizeof(sg), (void *)(gp + g_waiting_offset)) == 0 && sg)
			bpf_probe_read_user(&e->gopc, sizeof(e->gopc), (void *)(sg + sudog_c_offset));
		// mcall saved where the goroutine stopped.
		if (g_sched_bp_offset)
			bpf_probe_read_user(&fp, sizeof(fp), (void *)(gp + g_sched_bp_offset));
	} else if (kind == GI_EVENT_SEMA) {
		e->gopc = first_arg(regs);
	} else if (kind == GI_EVENT_POLL) {
		__s32 fd = -1;
		__u64 pd = first_arg(regs);
		if (pd && polldesc_fd_offset)
			bpf_probe_read_user(&fd, sizeof(fd), (void *)(pd + polldesc_fd_offset));
		e->gopc = (__u64)(__s64)fd;
	} else if (kind == GI_EVENT_READY) {
		// The thread's user goroutine, if any: systemstack saved its
		// frame pointer.
		__u64 g0 = current_g(regs, cookie), m = 0, curg = 0;
		if (g0 && bpf_probe_read_user(&m, sizeof(m), (void *)(g0 + g_m_offset)) == 0 && m &&
		    bpf_probe_read_user(&curg, sizeof(curg), (void *)(m + m_curg_offset)) == 0 && curg && curg != gp) {
			bpf_probe_read_user(&e->caller, sizeof(e->caller), (void *)(curg + goid_offset));
			if (g_sched_bp_offset)
				bpf_probe_read_user(&fp, sizeof(fp), (void *)(curg + g_sched_bp_offset));
		}
	}
	e->args_len = walk_frames(fp, s->pcs) * 8;
	bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
	account(GI_COST_SCHED, start, cookie);
	return 0;
}

// An empty program on the same probe points: the baseline of the per-call
// overhead benchmark.
SEC("uprobe.multi")
int gi_empty(struct gi_regs *regs)
{
	return 0;
}
