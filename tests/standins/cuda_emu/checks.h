// What the hardware punishes and a plain host run would not, checked on every load and store
// of the kernel code (included by emu.h after hopper_emu.h). The test build compiles the
// kernels with g++'s -fsanitize=thread instrumentation (--param
// tsan-instrument-func-entry-exit=0) and links no sanitizer runtime: g++ calls
// __tsan_{read,write}{1,2,4,8,16}(address) before each access (unlike ASan's instrumentation,
// none is dropped as redundant: a store after a load of the same address is seen), and the
// callbacks are defined here (with the atomics they turn into). Each access is
//   * in the block's shared window: a plain shared-memory access (rb_smem_access):
//       - inside the block's allocation (dynamic area or static arrays), else it fails;
//       - happens-before against the other threads' plain accesses of the same bytes: one
//         shadow cell per byte holds the last write (thread, its clock, its fence count) and
//         the reads since (one reader with its clock, or "several readers" with the number of
//         block-wide barriers they had passed). A write and another thread's access with no
//         synchronization between (barrier, named barrier, mbarrier: the vector clocks) is a
//         race, whatever the OS schedule was. Reads by several threads followed by another
//         thread's write need a __syncthreads between them (the block barrier is what orders
//         several readers in these kernels; a named barrier or mbarrier between them would be
//         reported: conservative);
//       - after a TMA into those bytes, only once its mbarrier phase was waited for;
//   * of a width of 2, 4, 8 or 16 bytes at an address that is not a multiple of it, where the
//     compiler took it for aligned (the aligned callbacks; a vector load or store, a float4,
//     a uint4 pack): a misaligned-address fault on the GPU, checked before the access;
//   * a store into a registered global buffer: each byte's first storing thread of the
//     launch is kept; another thread storing it (same value or not) is work done twice (a
//     grid-stride loop that strides one block, a tail indexed in the block): the launch fails
//     naming both threads;
//   * in a registered global buffer (rb_emu_buffer, named by the launcher): fine; within
//     RB_GUARD bytes before or after one and not inside any: out of bounds, the launch fails
//     naming the kernel, the buffer, the element and the distance past the end;
//   * anything else (stack, emulator state, unregistered memory): not checked before it is
//     made; an access far past every buffer that lands in no mapping faults, as on the GPU
//     (an illegal address), and the fault fails the launch naming the kernel, the access
//     and the nearest buffer (rb_fault below) instead of killing the process.
// Accesses made inside the emulator's functions (RB_API), by the harness around the kernel's
// call, and on the thread's own stack are not the kernel's: skipped. A failed check returns
// to the kernel's call with longjmp (the callbacks are nothrow for g++).
// The async proxy against the generic one (called from hopper_emu.h):
//   * a wgmma operand byte written by a plain store must be ordered after the store, and a
//     fence.proxy.async of the writer after the store must be ordered before the wgmma;
//   * a TMA into shared memory must be ordered after the plain accesses of those bytes;
//   * a TMA's tensor must lie inside the registered buffer its address points into.
#pragma once

// ------------------------------------------------------------------ global buffers
constexpr uintptr_t RB_GUARD = 64 * 1024;
struct RbBuf {
    uintptr_t lo = 0, hi = 0;
    unsigned elem = 1;
    char name[64] = "";
};
constexpr int RB_MAX_BUFS = 32;
static RbBuf rb_bufs[RB_MAX_BUFS];  // the running launch's (read-only while it runs)
static int rb_nbufs = 0;
static RbBuf rb_next_bufs[RB_MAX_BUFS];  // registered for the next launch
static int rb_next_nbufs = 0;

// Register a global buffer for the next launch of this library (the registrations are used
// by that launch and then dropped). Returns the number registered, -1 when full.
extern "C" int rb_emu_buffer(unsigned long long ptr, unsigned long long bytes, int elem,
                             const char* name) {
    if (rb_next_nbufs == RB_MAX_BUFS) return -1;
    RbBuf& b = rb_next_bufs[rb_next_nbufs++];
    b.lo = (uintptr_t)ptr;
    b.hi = (uintptr_t)(ptr + bytes);
    b.elem = elem > 0 ? (unsigned)elem : 1;
    snprintf(b.name, sizeof b.name, "%s", name ? name : "?");
    return rb_next_nbufs;
}

// Kernels that store elements more than once by design (name prefixes): the L2 probe's copy,
// whose blocks past nchunks copy a chunk again to keep the traffic in L2.
constexpr const char* RB_REWRITES_BY_DESIGN[] = {"l2_copy_"};
static bool rb_rewrites_allowed = false;

// Per registered buffer of the running launch, the first thread to store each byte (its
// global index + 1: block * threads per block + thread; 0 = none yet). Mapped zero-filled at
// launch begin, so only the pages a launch stores into cost memory.
static std::atomic<uint32_t>* rb_owner[RB_MAX_BUFS];
static size_t rb_owner_bytes[RB_MAX_BUFS];

// ------------------------------------------------------------- faults of the kernel
// An access of the kernel's own code past every buffer's guard zone is not checked before it
// is made (nothing tells a stray address from the emulator's own memory). Where it lands in
// no mapping the CPU faults, as the GPU would (an illegal address: an index far past the
// buffer, a garbage pointer). During a launch that fault (SIGSEGV, SIGBUS) comes here: on a
// CUDA thread inside its kernel's code it fails the launch, naming the kernel, the load or
// store, its address and the nearest registered buffer, and returns to the kernel's call
// (longjmp, as a failed check does; SA_NODEFER leaves the signal unblocked after it). Any
// other fault (the emulator's own) is handed to the handler that was there before (Python's
// faulthandler; the default action): a crash of the emulator stays a crash. The handler runs on the block slot's
// alternate stack (rb_run_grid), so a kernel overflowing its fiber's stack is named too.
// Same-process accesses that land in mapped memory are not seen: a GPU does not fault on
// those either.
static struct sigaction rb_old_segv, rb_old_bus;
static std::atomic<int> rb_fault_launches{0};  // this library's launches running

// Where the faulting address is: against the registered buffers and this thread's stack.
RB_NOSAN __attribute__((no_sanitize_address)) std::string rb_fault_where(uintptr_t a, int code) {
    char out[360];
    if (code == SI_KERNEL && a == 0)  // a general-protection fault: no address reported
        return "at a non-canonical address (an index so far past any buffer that the CPU "
               "cannot map the address)";
    if (a < rb_stack_lo && a >= rb_stack_lo - 4096)
        return "in the guard page below its stack: the thread overflowed its " +
               std::to_string(RB_FIBER_STACK / 1024) + " KiB stack (a local array too large)";
    int best = -1;
    unsigned long long dist = ~0ull;
    for (int i = 0; i < rb_nbufs; ++i) {
        const RbBuf& b = rb_bufs[i];
        const unsigned long long d = a >= b.hi ? a - b.hi : a < b.lo ? b.lo - a : 0;
        if (d < dist) dist = d, best = i;
    }
    const unsigned long long ua = a;
    if (best < 0) {
        snprintf(out, sizeof out, "at 0x%llx, in no mapping (no buffer registered for the "
                 "launch)", ua);
        return out;
    }
    const RbBuf& b = rb_bufs[best];
    const unsigned long long n = (b.hi - b.lo) / b.elem;
    if (a >= b.hi)
        snprintf(out, sizeof out, "at 0x%llx: %s + %llu (element %llu of a buffer of %llu "
                 "elements, %llu bytes past its end), in no mapping: outside every buffer and "
                 "its %llu KiB guard zone", ua, b.name, ua - b.lo, (ua - b.lo) / b.elem, n,
                 ua - b.hi, (unsigned long long)(RB_GUARD / 1024));
    else if (a < b.lo)
        snprintf(out, sizeof out, "at 0x%llx: %s - %llu (before the start of a buffer of %llu "
                 "elements), in no mapping: outside every buffer and its %llu KiB guard zone",
                 ua, b.name, b.lo - ua, n, (unsigned long long)(RB_GUARD / 1024));
    else
        snprintf(out, sizeof out, "at 0x%llx: %s + %llu (element %llu of a buffer of %llu "
                 "elements), which is not mapped (a buffer freed or never allocated)", ua,
                 b.name, ua - b.lo, (ua - b.lo) / b.elem, n);
    return out;
}

RB_NOSAN __attribute__((no_sanitize_address)) void rb_fault(int sig, siginfo_t* si, void* uc) {
    RbThread* me = rb_me;
    if (!me || me->in_check || !me->out || !rb_blk) {  // not the kernel's code: not ours
        const struct sigaction& old = sig == SIGBUS ? rb_old_bus : rb_old_segv;
        if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction)
            old.sa_sigaction(sig, si, uc);  // another library's rb_fault, faulthandler, ...
        else if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL &&
                 old.sa_handler != SIG_IGN)
            old.sa_handler(sig);
        else
            signal(sig, SIG_DFL);  // the access runs again: the default action, a crash
        return;
    }
    me->in_check = true;
    const auto* ctx = static_cast<const ucontext_t*>(uc);
    const bool nonc = si->si_code == SI_KERNEL;
    const char* what = nonc ? "an access" : (ctx->uc_mcontext.gregs[REG_ERR] & 2) ? "a store"
                                                                                   : "a load";
    try {
        rb_fail("%s: illegal address: %s %s (%s on the GPU; the emulation stops the launch "
                "there)", rb_kernel, what,
                rb_fault_where((uintptr_t)si->si_addr, si->si_code).c_str(),
                sig == SIGBUS ? "a bus error" : "an illegal memory access");
    } catch (RbTrap&) {
    }
    longjmp(*me->out, 1);
}

// Installed by the first of this library's launches running, put back by the last, unless
// another handler was put over it meanwhile (that one chains to it; installed again later,
// it keeps what it had saved: never itself).
void rb_fault_catch(bool on) {
    struct sigaction cur{};
    sigaction(SIGSEGV, nullptr, &cur);
    const bool ours = (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == rb_fault;
    if (on && rb_fault_launches++ == 0 && !ours) {
        struct sigaction sa{};
        sa.sa_sigaction = rb_fault;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &rb_old_segv);
        sigaction(SIGBUS, &sa, &rb_old_bus);
    } else if (!on && rb_fault_launches > 0 && --rb_fault_launches == 0 && ours) {
        sigaction(SIGSEGV, &rb_old_segv, nullptr);
        sigaction(SIGBUS, &rb_old_bus, nullptr);
    }
}

void rb_checks_launch_begin(void* fn) {
    Dl_info info{};
    const char* name = fn && dladdr(fn, &info) && info.dli_sname ? info.dli_sname : "kernel";
    if (!strncmp(name, "rb_params__", 11)) name += 11;
    snprintf(rb_kernel, sizeof rb_kernel, "%s", name);
    std::copy(rb_next_bufs, rb_next_bufs + rb_next_nbufs, rb_bufs);
    rb_nbufs = rb_next_nbufs;
    rb_next_nbufs = 0;
    rb_rewrites_allowed = false;
    rb_fault_catch(true);
    for (const char* pre : RB_REWRITES_BY_DESIGN)
        rb_rewrites_allowed |= !strncmp(rb_kernel, pre, strlen(pre));
    for (int i = 0; i < rb_nbufs; ++i) {
        const size_t bytes =
            rb_rewrites_allowed ? 0 : (rb_bufs[i].hi - rb_bufs[i].lo) * sizeof(uint32_t);
        void* m = bytes ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                        : MAP_FAILED;
        rb_owner[i] = m == MAP_FAILED ? nullptr : static_cast<std::atomic<uint32_t>*>(m);
        rb_owner_bytes[i] = m == MAP_FAILED ? 0 : bytes;
    }
}
void rb_checks_launch_end() {
    rb_fault_catch(false);
    for (int i = 0; i < rb_nbufs; ++i)
        if (rb_owner[i]) munmap(rb_owner[i], rb_owner_bytes[i]);
    rb_nbufs = 0;
    rb_next_nbufs = 0;
}

// This thread's index in the grid, + 1.
RB_NOSAN uint32_t rb_global_thread_id() {
    const RbBlock& b = *rb_blk;
    const uint64_t block = b.idx.x + (uint64_t)rb_grid_dim.x *
                                         (b.idx.y + (uint64_t)rb_grid_dim.y * b.idx.z);
    return (uint32_t)(block * b.nthreads + rb_me->tid + 1);
}

// A store of n bytes at a of buffer i: every byte's first storer this launch must be us.
RB_NOSAN void rb_store_once(int i, uintptr_t a, size_t n) {
    std::atomic<uint32_t>* own = rb_owner[i];
    if (!own) return;
    const RbBuf& b = rb_bufs[i];
    const uint32_t me = rb_global_thread_id();
    for (size_t k = 0; k < n; ++k) {
        uint32_t prev = 0;
        std::atomic<uint32_t>& o = own[a - b.lo + k];
        if (o.compare_exchange_strong(prev, me, std::memory_order_relaxed) || prev == me)
            continue;
        const long long off = (long long)(a - b.lo);
        const uint32_t nt = (uint32_t)rb_blk->nthreads;
        rb_fail("%s: global store of %zu bytes at %s + %lld (element %lld) by a second thread: "
                "block %u thread %u of this launch stored it first (each element is written by "
                "one thread: work done twice, by blocks whose loops overlap or a tail every "
                "block writes)",
                rb_kernel, n, b.name, off, off / (long long)b.elem, (prev - 1) / nt,
                (prev - 1) % nt);
    }
}

[[noreturn]] RB_NOSAN void rb_oob(const RbBuf& b, uintptr_t a, size_t n, const char* what) {
    const long long off = (long long)(a - b.lo);
    const unsigned long long size = b.hi - b.lo;
    if (a + n > b.hi)
        rb_fail("%s: out-of-bounds %s of %zu bytes at %s + %lld (element %lld of a buffer of "
                "%llu elements, %llu bytes): %lld bytes past its end",
                rb_kernel, what, n, b.name, off, off / (long long)b.elem, size / b.elem, size,
                (long long)(a + n - b.hi));
    rb_fail("%s: out-of-bounds %s of %zu bytes at %s - %lld (before its start; a buffer of "
            "%llu elements, %llu bytes)",
            rb_kernel, what, n, b.name, -off, size / b.elem, size);
}

// A load or store of global memory by the kernel. In bounds of a registered buffer: the place
// where a count of the bytes each launch moves would be kept.
RB_NOSAN void rb_global_access(uintptr_t a, size_t n, bool store) {
    for (int i = 0; i < rb_nbufs; ++i)
        if (a >= rb_bufs[i].lo && a + n <= rb_bufs[i].hi) {
            if (store) rb_store_once(i, a, n);
            return;
        }
    for (int i = 0; i < rb_nbufs; ++i) {
        const RbBuf& b = rb_bufs[i];
        if (a + n > b.lo - RB_GUARD && a < b.hi + RB_GUARD) rb_oob(b, a, n, store ? "store" : "load");
    }
}

// TMA reads the tensor of its map: it must lie inside the buffer its address points into.
RB_NOSAN void rb_tma_check_global(const RbTensorMap& tm, const char* op) {
    if (!rb_nbufs) return;
    const uintptr_t lo = (uintptr_t)tm.addr;
    const uintptr_t hi = lo + (tm.dims[1] - 1) * tm.strides[0] + tm.dims[0] * tm.elem_bytes;
    for (int i = 0; i < rb_nbufs; ++i) {
        const RbBuf& b = rb_bufs[i];
        if (lo >= b.lo && lo < b.hi) {
            if (hi > b.hi)
                rb_fail("%s: the tensor map's %llu x %llu elements (row stride %llu bytes) reach "
                        "%llu bytes past the end of %s",
                        op, (unsigned long long)tm.dims[1], (unsigned long long)tm.dims[0],
                        (unsigned long long)tm.strides[0], (unsigned long long)(hi - b.hi),
                        b.name);
            return;
        }
    }
    for (int i = 0; i < rb_nbufs; ++i)
        if (lo >= rb_bufs[i].lo - RB_GUARD && lo < rb_bufs[i].hi + RB_GUARD)
            rb_oob(rb_bufs[i], lo, tm.elem_bytes, "TMA tensor start");
}

// ------------------------------------------------------------- shared-memory shadow
// Per byte of each window: w = (writer + 1) << 48 | (its fence count & 0xFFFF) << 32 | clock;
// r = (reader + 1) << 32 | clock, or RB_MULTI | barriers passed (several readers).
struct RbCell {
    std::atomic<uint64_t> w, r;
};
constexpr uint64_t RB_MULTI = 1ull << 63;
static RbCell rb_shadow[RB_IN_FLIGHT][RB_SMEM_LIMIT];

void rb_checks_block_begin(RbBlock&) {}

// Called when a block ends: its shadow is cleared up to the top of its allocation.
RB_NOSAN void rb_checks_block_end(RbBlock& blk, unsigned top) {
    for (unsigned i = 0; i < top && i < RB_SMEM_LIMIT; ++i) {
        rb_shadow[blk.slot][i].w.store(0, std::memory_order_relaxed);
        rb_shadow[blk.slot][i].r.store(0, std::memory_order_relaxed);
    }
}

[[noreturn]] RB_NOSAN void rb_race(const char* now, unsigned addr, size_t n, const char* then,
                                   int other) {
    rb_fail("%s: shared-memory race: %s of shared 0x%x (%zu bytes) and thread %d's %s of it "
            "with no synchronization (__syncthreads, bar.sync, mbarrier) between them",
            rb_kernel, now, addr, n, other, then);
}

RB_NOSAN_INLINE inline bool rb_ordered(const RbThread& me, int other, uint32_t clk) {
    return other == me.tid || me.clk[other] >= clk;
}

// A plain (generic-proxy) access of `n` bytes at shared address `off` by this thread.
RB_NOSAN void rb_smem_access(RbBlock& blk, RbThread& me, unsigned off, unsigned n, bool store) {
    RbHopperBlock& hb = *static_cast<RbHopperBlock*>(blk.hopper);
    const char* what = store ? "store" : "load";
    const unsigned top = __atomic_load_n(&hb.static_top, __ATOMIC_RELAXED);
    const bool dyn = off >= RB_DYN_BASE && off + n <= RB_DYN_BASE + hb.dyn_bytes;
    const bool stat = off >= hb.static_base && off + n <= top;
    if (!dyn && !stat)
        rb_fail("%s: plain %s of %u bytes at shared 0x%x is outside the block's allocation "
                "(dynamic %u bytes at 0x%x, static up to 0x%x)",
                rb_kernel, what, n, off, hb.dyn_bytes, RB_DYN_BASE, top);
    for (unsigned li = off / RB_LINE; li <= (off + n - 1) / RB_LINE; ++li) {
        RbLine& ln = hb.lines[li];
        const uint64_t tag = ln.tma.load(std::memory_order_relaxed);
        if (tag && me.clk[tag >> 48] < (uint32_t)(tag & 0xFFFFFFFFFFFFull))
            rb_fail("%s: plain %s of shared 0x%x, written by a TMA whose mbarrier phase this "
                    "thread has not waited for",
                    rb_kernel, what, off);
        if (store && !ln.plain.load(std::memory_order_relaxed))
            ln.plain.store(1, std::memory_order_relaxed);
    }
    const int t = me.tid;
    const uint32_t c = me.clk[t], g = me.bar_gen;
    const uint32_t nf = me.nfences.load(std::memory_order_relaxed) & 0xFFFF;
    RbCell* cell = rb_shadow[blk.slot] + off;
    for (unsigned i = 0; i < n; ++i) {
        RbCell& cl = cell[i];
        const uint64_t w = cl.w.load(std::memory_order_relaxed);
        if (w) {
            const int wt = (int)(w >> 48) - 1;
            if (!rb_ordered(me, wt, (uint32_t)w)) rb_race(what, off + i, n, "store", wt);
        }
        const uint64_t r = cl.r.load(std::memory_order_relaxed);
        const bool multi = r & RB_MULTI;
        const int rt = multi ? -1 : (int)(r >> 32) - 1;
        if (store) {
            if (multi && (uint32_t)r >= g)
                rb_fail("%s: shared-memory race: store of shared 0x%x (%u bytes) after loads by "
                        "several threads with no __syncthreads between them",
                        rb_kernel, off + i, n);
            if (r && !multi && !rb_ordered(me, rt, (uint32_t)r))
                rb_race(what, off + i, n, "load", rt);
            cl.w.store(((uint64_t)(t + 1) << 48) | ((uint64_t)nf << 32) | c,
                       std::memory_order_relaxed);
            if (r) cl.r.store(0, std::memory_order_relaxed);
        } else if (!r || (multi ? (uint32_t)r < g : rb_ordered(me, rt, (uint32_t)r))) {
            cl.r.store(((uint64_t)(t + 1) << 32) | c, std::memory_order_relaxed);
        } else if (!multi) {
            cl.r.store(RB_MULTI | g, std::memory_order_relaxed);
        }
    }
}

// The async proxy (wgmma) reads the elements `t` lists: a byte that a plain store wrote must
// be ordered after the store, and after a fence.proxy.async of the writer that follows it.
RB_NOSAN void rb_async_read_of_plain(const RbAddrs& t, int e, const char* op) {
    RbBlock& blk = *rb_blk;
    RbHopperBlock& hb = *static_cast<RbHopperBlock*>(blk.hopper);
    const RbLine* const lines = hb.lines.get();  // raw: see rb_wgmma_e
    bool any = false;
    for (const uint32_t *li = t.lines.data(), *end = li + t.lines.size(); li != end; ++li)
        any |= lines[*li].plain.load(std::memory_order_relaxed) != 0;
    if (!any) return;
    const RbThread& me = *rb_me;
    for (const uint32_t *pa = t.a.data(), *end = pa + t.a.size(); pa != end; ++pa) {
        const uint32_t a = *pa;
        if (!lines[a / RB_LINE].plain.load(std::memory_order_relaxed)) continue;
        for (int i = 0; i < e; ++i) {
            const uint64_t w = rb_shadow[blk.slot][a + i].w.load(std::memory_order_relaxed);
            if (!w) continue;
            const int wt = (int)(w >> 48) - 1;
            const uint32_t wclk = (uint32_t)w, wnf = (uint32_t)(w >> 32) & 0xFFFF;
            if (!rb_ordered(me, wt, wclk))
                rb_fail("%s: %s reads shared 0x%x, which thread %d stored with no "
                        "synchronization between the store and the read",
                        rb_kernel, op, a + i, wt);
            const RbThread& wr = *blk.threads[wt];
            const uint32_t nf = wr.nfences.load(std::memory_order_acquire);
            const uint32_t after = (nf - wnf) & 0xFFFF;  // fences of the writer since the store
            bool fenced = false;
            if (after) {
                const uint32_t first = after <= RB_FENCE_RING ? nf - after : nf - RB_FENCE_RING;
                fenced = me.clk[wt] > wr.fence_clk[first % RB_FENCE_RING];
            }
            if (!fenced)
                rb_fail("%s: %s (async proxy) reads shared 0x%x, which thread %d stored through "
                        "the generic proxy with no fence.proxy.async after the store ordered "
                        "before the read",
                        rb_kernel, op, a + i, wt);
        }
    }
}

// A TMA (async proxy) writes [dst, dst + bytes): the plain accesses of those bytes must be
// ordered before the issuing thread; they are then forgotten (the TMA line tag takes over).
RB_NOSAN void rb_plain_before_async_write(unsigned dst, unsigned bytes, const char* op) {
    RbBlock& blk = *rb_blk;
    const RbThread& me = *rb_me;
    RbCell* cell = rb_shadow[blk.slot] + dst;
    for (unsigned i = 0; i < bytes && dst + i < RB_SMEM_LIMIT; ++i) {
        RbCell& cl = cell[i];
        const uint64_t w = cl.w.load(std::memory_order_relaxed);
        const uint64_t r = cl.r.load(std::memory_order_relaxed);
        if (!w && !r) continue;
        if (w && !rb_ordered(me, (int)(w >> 48) - 1, (uint32_t)w))
            rb_fail("%s: %s into shared 0x%x overwrites what thread %d stored, with no "
                    "synchronization between",
                    rb_kernel, op, dst + i, (int)(w >> 48) - 1);
        if (r & RB_MULTI ? (uint32_t)r >= me.bar_gen
                         : r && !rb_ordered(me, (int)(r >> 32) - 1, (uint32_t)r))
            rb_fail("%s: %s into shared 0x%x overwrites what other threads are reading, with no "
                    "synchronization between",
                    rb_kernel, op, dst + i);
        cl.w.store(0, std::memory_order_relaxed);
        cl.r.store(0, std::memory_order_relaxed);
    }
}

// An access of n bytes at a that the compiler took for aligned to n (a load or store of a
// naturally aligned type: a float4, a uint4 pack, a double) whose address is not: the GPU
// faults with a misaligned address; x86 would load it.
[[noreturn]] RB_NOSAN void rb_misaligned(uintptr_t a, size_t n, bool store, uintptr_t off) {
    const char* what = store ? "store" : "load";
    if (off < RB_SMEM_WINDOW)
        rb_fail("%s: misaligned %zu-byte %s at shared 0x%llx (not a multiple of %zu: a "
                "misaligned-address fault on the GPU)",
                rb_kernel, n, what, (unsigned long long)off, n);
    for (int i = 0; i < rb_nbufs; ++i) {
        const RbBuf& b = rb_bufs[i];
        if (a >= b.lo && a < b.hi)
            rb_fail("%s: misaligned %zu-byte %s at %s + %lld (element %lld; the address is %llu "
                    "mod %zu: a misaligned-address fault on the GPU)",
                    rb_kernel, n, what, b.name, (long long)(a - b.lo),
                    (long long)(a - b.lo) / (long long)b.elem, (unsigned long long)(a % n), n);
    }
    rb_fail("%s: misaligned %zu-byte %s at 0x%llx (%llu mod %zu: a misaligned-address fault on "
            "the GPU)",
            rb_kernel, n, what, (unsigned long long)a, (unsigned long long)(a % n), n);
}

// --------------------------------------------------------- the sanitizer callbacks
RB_NOSAN_INLINE inline void rb_access(void* p, size_t n, bool store, bool aligned = false) {
    RbThread* me = rb_me;
    if (!me || me->in_check) return;
    RbBlock* blk = me->blk;
    const uintptr_t a = (uintptr_t)p;
    const uintptr_t off = a - (uintptr_t)blk->smem;
    me->in_check = true;  // rb_fail's own (instrumented) accesses are not the kernel's
    bool failed = false;
    try {
        if (aligned && a % n != 0 && a - rb_stack_lo >= rb_stack_hi - rb_stack_lo)
            rb_misaligned(a, n, store, off);
        if (off < RB_SMEM_WINDOW)
            rb_smem_access(*blk, *me, (unsigned)off, (unsigned)n, store);
        else if (rb_nbufs && a - rb_stack_lo >= rb_stack_hi - rb_stack_lo)
            rb_global_access(a, n, store);
    } catch (RbTrap&) {
        failed = true;
    }
    // The callback is nothrow for g++: a failure goes back to the kernel's call (emu.h
    // rb_run_kernel), never through the kernel's frames, and the access is not made.
    if (failed && me->out) longjmp(*me->out, 1);
    me->in_check = false;
}

// The counting build's check (bytes_count.cpp calls this before every access the
// instrumentation reports): an access inside a registered buffer that is misaligned to its
// width fails the launch, returning to the kernel's call before the access is made (x86's
// movdqa would fault: a segfault of the test process). Only inside the buffers: the whole
// emulation is instrumented in that build, and its own inline helpers touch heap objects near
// them (out-of-bounds accesses are the guard ranges' counts there; stores twice, the written
// bytes against the declaration). Not instrumented itself (its loads would call it again);
// in_check is set before it calls what is.
extern "C" RB_NOSAN __attribute__((no_sanitize_address)) void rb_emu_check_access(
    const void* p, unsigned long long n, int store) {
    RbThread* me = rb_me;
    const uintptr_t a = (uintptr_t)p;
    if (!me || me->in_check || !(n == 2 || n == 4 || n == 8 || n == 16) || a % n == 0) return;
    bool inside = false;
    for (int i = 0; i < rb_nbufs && !inside; ++i) inside = a >= rb_bufs[i].lo && a < rb_bufs[i].hi;
    if (!inside) return;
    me->in_check = true;
    try {
        rb_misaligned(a, n, store, RB_SMEM_WINDOW);
    } catch (RbTrap&) {
    }
    if (me->out) longjmp(*me->out, 1);
    me->in_check = false;
}

// The callbacks of g++'s -fsanitize=thread instrumentation (the build links no sanitizer
// runtime): every load and store of instrumented code, and its atomics, which are executed
// here as they are (sequentially consistent).
#define RB_CB extern "C" __attribute__((visibility("hidden"))) RB_NOSAN_INLINE
#define RB_TSAN_ACCESS(N)                                                                     \
    RB_CB void __tsan_read##N(void* p) { rb_access(p, N, false, true); }                       \
    RB_CB void __tsan_write##N(void* p) { rb_access(p, N, true, true); }                       \
    RB_CB void __tsan_unaligned_read##N(void* p) { rb_access(p, N, false); }                   \
    RB_CB void __tsan_unaligned_write##N(void* p) { rb_access(p, N, true); }
RB_CB void __tsan_read1(void* p) { rb_access(p, 1, false); }
RB_CB void __tsan_write1(void* p) { rb_access(p, 1, true); }
RB_TSAN_ACCESS(2)
RB_TSAN_ACCESS(4)
RB_TSAN_ACCESS(8)
RB_TSAN_ACCESS(16)
RB_CB void __tsan_read_range(void* p, unsigned long n) { rb_access(p, n, false); }
RB_CB void __tsan_write_range(void* p, unsigned long n) { rb_access(p, n, true); }
RB_CB void __tsan_init() {}
RB_CB void __tsan_func_entry(void*) {}
RB_CB void __tsan_func_exit() {}
RB_CB void __tsan_vptr_update(void**, void*) {}
RB_CB void __tsan_vptr_read(void**) {}
RB_CB void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
RB_CB void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
#define RB_SEQ __ATOMIC_SEQ_CST
#define RB_TSAN_RMW(N, T, OP)                                                                 \
    RB_CB T __tsan_atomic##N##_##OP(volatile void* a, T v, int) {                             \
        return __atomic_##OP((volatile T*)a, v, RB_SEQ);                                      \
    }
#define RB_TSAN_ATOMIC(N, T)                                                                  \
    RB_CB T __tsan_atomic##N##_load(const volatile void* a, int) {                            \
        return __atomic_load_n((const volatile T*)a, RB_SEQ);                                 \
    }                                                                                          \
    RB_CB void __tsan_atomic##N##_store(volatile void* a, T v, int) {                         \
        __atomic_store_n((volatile T*)a, v, RB_SEQ);                                           \
    }                                                                                          \
    RB_CB T __tsan_atomic##N##_exchange(volatile void* a, T v, int) {                         \
        return __atomic_exchange_n((volatile T*)a, v, RB_SEQ);                                 \
    }                                                                                          \
    RB_TSAN_RMW(N, T, fetch_add)                                                               \
    RB_TSAN_RMW(N, T, fetch_sub)                                                               \
    RB_TSAN_RMW(N, T, fetch_and)                                                               \
    RB_TSAN_RMW(N, T, fetch_or)                                                                \
    RB_TSAN_RMW(N, T, fetch_xor)                                                               \
    RB_TSAN_RMW(N, T, fetch_nand)                                                              \
    RB_CB bool __tsan_atomic##N##_compare_exchange_strong(volatile void* a, void* e, T d, int, \
                                                          int) {                               \
        return __atomic_compare_exchange_n((volatile T*)a, (T*)e, d, false, RB_SEQ, RB_SEQ);   \
    }                                                                                          \
    RB_CB bool __tsan_atomic##N##_compare_exchange_weak(volatile void* a, void* e, T d, int,   \
                                                        int) {                                 \
        return __atomic_compare_exchange_n((volatile T*)a, (T*)e, d, true, RB_SEQ, RB_SEQ);    \
    }                                                                                          \
    RB_CB T __tsan_atomic##N##_compare_exchange_val(volatile void* a, T e, T d, int, int) {   \
        __atomic_compare_exchange_n((volatile T*)a, &e, d, false, RB_SEQ, RB_SEQ);             \
        return e;                                                                              \
    }
RB_TSAN_ATOMIC(8, unsigned char)
RB_TSAN_ATOMIC(16, unsigned short)
RB_TSAN_ATOMIC(32, unsigned int)
RB_TSAN_ATOMIC(64, unsigned long)
