// The Hopper primitives of kernels/cuda/hopper_ops.cuh, executed on the host (included by
// emu.h). What is modelled, and how an error shows (rb_fail: the launch fails with the
// message, nothing hangs):
//   * Shared memory: one window per block in flight, shared addresses 0..256 KiB as on the
//     chip; the dynamic area starts at 0x410 (not 1024-aligned, so the kernels' own alignment
//     is exercised), static arrays (RB_STATIC_SMEM, and every __shared__ declaration, which the
//     build rewrites into rb_shared) follow it; the window is filled with 0xFF (NaN in every
//     float type) before each block. TMA, wgmma, mbarrier and plain accesses outside the
//     block's allocation fail.
//   * mbarrier: init (count 1 .. 2^20-1), arrive, arrive.expect_tx, TMA's complete_tx and
//     try_wait.parity with the PTX semantics: a phase completes when both the pending arrival
//     count and the transaction count are zero; try_wait.parity(p) succeeds once the phase of
//     parity p has completed (a fresh barrier passes parity 1), and waiting on the wrong
//     parity does not return. More arrivals than the count in one phase, use before init (or
//     without synchronizing with the init), a plain store over the barrier object, a
//     transaction count out of range fail; so does any use (by a thread, or TMA's complete_tx)
//     that no fence.mbarrier_init after the init is ordered before. A block that ends with
//     work in flight fails: expected bytes that never came, a TMA whose phase no thread's
//     wait observed, a phase with some of its arrivals in.
//   * TMA (cp.async.bulk.tensor.2d): reads the fields the stand-in driver encoded
//     (tests/standins/fake_cupy/cuda/bindings/driver.py: RbTensorMap below): global address, dims,
//     row stride, box, element size, swizzle; out-of-bounds elements are zero; the box lands
//     row-major with the 128/64/32-byte swizzle applied by shared address and completes its
//     bytes on the mbarrier; the destination reads 0xFF until the phase completes, when the
//     data lands (so a plain load that did not wait sees NaN). The write is checked against the wgmma reads of the same lines:
//     a write into a stage that a wgmma group still reads (not waited), or whose readers'
//     wait_group is not ordered before this write (happens-before through mbarriers and
//     barriers: vector clocks), fails.
//   * wgmma: fence / mma_async / commit_group / wait_group per thread of the warpgroup. An
//     mma_async reads its operands through the descriptors (gmma_decode.h), accumulates into
//     the accumulator state of its `d` registers and sets those registers to NaN until the
//     wait_group that retires the last group writing them; a read of a line that TMA wrote
//     without the reader having waited for that TMA's mbarrier phase fails; at retirement the
//     operands are read again and must not have changed; mma_async without a wgmma.fence
//     since the last wait_group, and a thread ending with groups pending, fail.
//   * setmaxnreg: a no-op whose values are checked (multiples of 8 in 24..256, inc/dec
//     direction, the warpgroups' budgets within the 64 K registers).
//   * The generic proxy's shared-memory stores (checks.h) read by the async proxy: a wgmma
//     operand byte a plain store wrote needs a fence.proxy.async of the writer after the store,
//     ordered before the wgmma; a TMA write needs the plain accesses of its bytes ordered before.
// Not modelled: clusters, multicast, tensor maps of rank > 3 and elementStrides != 1,
// interleaved layouts, and timing beyond that ordering.
#pragma once
#define RB_HOPPER_EMULATED 1
#include <deque>

#include "gmma_decode.h"

// The stand-in driver's CUtensorMap: the fields of cuTensorMapEncodeTiled, little-endian,
// 128 bytes (struct layout mirrored by tests/standins/fake_cupy/cuda/bindings/driver.py).
struct RbTensorMap {
    uint32_t magic, dtype, rank, swizzle, interleave, oob_fill, l2_promotion, elem_bytes;
    uint64_t addr;
    uint64_t dims[3];
    uint64_t strides[2];  // bytes between consecutive indices of dims 1..rank-1
    uint32_t box[3];
    uint32_t elem_strides[3];
};
static_assert(sizeof(RbTensorMap) <= 128, "a CUtensorMap is 128 bytes");
constexpr uint32_t RB_TMAP_MAGIC = 0x4D544252;  // "RBTM"

constexpr unsigned RB_SMEM_WINDOW = 256 * 1024;  // the descriptors' 18-bit shared addresses
constexpr unsigned RB_SMEM_LIMIT = 228 * 1024;   // an sm_90 block: 227 KiB + 1 KiB reserved
constexpr unsigned RB_DYN_BASE = 1024 + 16;      // after the reserved KiB, deliberately unaligned
constexpr unsigned RB_LINE = 128;                // shadow granularity (bytes)
constexpr int RB_MAX_WG = 8;
constexpr int RB_RING = 256;    // wgmma retire epochs remembered per thread
constexpr int RB_SLOTS = 64;    // mbarriers (vector-clock slots of their TMA completions)

constexpr uint32_t RB_NOT_FENCED = 0xFFFFFFFFu;
struct RbMbar {
    unsigned addr = 0, count = 0, phase = 0;
    int pending = 0, slot = 0, init_tid = 0;
    long long tx = 0;
    uint32_t init_epoch = 0;
    uint32_t fenced_clk = RB_NOT_FENCED;  // the init thread's clock at its fence.mbarrier_init
    uint64_t tma_seq = 0;
    uint64_t waited_seq = 0;  // the last TMA whose phase a thread's wait observed
    RbVc accum, done;
    // TMA data of the current phase: it lands in shared memory when the phase completes.
    std::vector<std::pair<unsigned, std::vector<unsigned char>>> landing;
};

struct RbLine {
    std::atomic<uint32_t> read_group[RB_MAX_WG];  // last wgmma group of each warpgroup
    std::atomic<uint64_t> tma;                     // (slot << 48) | seq of the last TMA write
    std::atomic<uint8_t> plain;                    // a plain store wrote it since the last TMA
};

// The shared addresses one thread reads for one operand of one descriptor (cached: a
// kernel cycles through a few descriptors), with their lowest and highest byte.
struct RbAddrs {
    std::vector<uint32_t> a;
    std::vector<uint32_t> lines;  // the 128-byte lines they touch, each once
    uint32_t lo = ~0u, hi = 0;
};
using RbAddrsPtr = std::shared_ptr<const RbAddrs>;
// Shared by every block of the launch (a table depends only on the descriptor, the operand
// role and the thread's place in its warpgroup): one shard per place.
struct RbAddrCache {
    std::mutex m;
    std::map<std::pair<uint64_t, int>, RbAddrsPtr> tables;
};
static RbAddrCache rb_addr_cache[128];
struct RbWgOp {
    float* d;
    int e;                      // element bytes
    RbAddrsPtr a, b;            // this thread's A elements (2 rows x K), B (64 columns x K)
    std::vector<uint8_t> snap;  // their bytes at issue
};
struct RbAcc {
    float v[128];
    int pending = 0;
};
struct RbHopperThread {
    bool fenced = false;
    std::vector<RbWgOp> open;               // issued since the last commit
    std::deque<std::vector<RbWgOp>> groups;  // committed, not yet retired
    uint32_t committed = 0;
    std::atomic<uint32_t> retired{0};
    std::atomic<uint32_t> retire_epoch[RB_RING];
    std::map<float*, RbAcc> acc;
    unsigned wait_bar = ~0u, wait_parity = 0;
    long long wait_since_ns = 0;
    std::string last_printf;
};

struct RbHopperBlock {
    unsigned dyn_bytes = 0, static_base = 0, static_top = 0;
    std::map<std::string, unsigned> statics;
    std::map<const void*, unsigned> keyed;  // __shared__ declarations (rb_shared)
    std::mutex m;  // mbarriers, TMA, statics, setmaxnreg
    std::map<unsigned, std::unique_ptr<RbMbar>> bars;
    int slots = 0;
    std::unique_ptr<RbLine[]> lines;
    std::vector<std::unique_ptr<RbHopperThread>> th;
    int maxnreg[RB_MAX_WG] = {};
};

// Window memory of each block in flight: shared addresses are offsets into it.
alignas(1024) static unsigned char rb_windows[RB_IN_FLIGHT][RB_SMEM_WINDOW];
#define rb_window (rb_blk->smem)
static std::atomic<double> rb_hang_limit_s{120.0};

struct RbStats {
    std::atomic<long long> wgmma{0}, flops{0}, tma{0}, tma_bytes{0}, phases{0}, waits{0};
};
static RbStats rb_stats;

inline RbHopperBlock& rb_hb() { return *static_cast<RbHopperBlock*>(rb_blk->hopper); }
inline RbHopperThread& rb_ht() { return *rb_hb().th[rb_me->tid]; }

inline long long rb_now_ns() {
    using namespace std::chrono;
    return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

// Device printf: printed, and remembered so that a trap can say what preceded it.
inline int rb_printf(const char* fmt, ...) {
    RB_API;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fputs(buf, stdout);
    fflush(stdout);
    if (rb_blk && rb_blk->hopper) rb_ht().last_printf = buf;
    return n;
}

std::string rb_last_printf() {
    return rb_blk && rb_blk->hopper && rb_me ? rb_ht().last_printf : std::string();
}

// ---------------------------------------------------------------- shared memory
RB_NOSAN_INLINE inline unsigned smem_u32(const void* p) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    if (c < rb_window || c >= rb_window + RB_SMEM_WINDOW)
        rb_fail("__cvta_generic_to_shared of %p: not a shared-memory pointer", p);
    return (unsigned)(c - rb_window);
}
inline unsigned char* rb_dynamic_smem() { RB_API; return rb_window + RB_DYN_BASE; }
template <typename Key, typename Map>
inline void* rb_static_alloc(Map& map, const Key& key, const char* name, size_t bytes,
                             size_t align) {
    RbHopperBlock& hb = rb_hb();
    std::lock_guard<std::mutex> lk(hb.m);
    auto it = map.find(key);
    if (it == map.end()) {
        const unsigned a = (unsigned)std::max<size_t>(align, 16);
        const unsigned off = (hb.static_top + a - 1) / a * a;
        if (off + bytes > RB_SMEM_LIMIT)
            rb_fail("static shared array %s (%zu bytes) exceeds the block's shared memory",
                    name, bytes);
        hb.static_top = off + (unsigned)bytes;
        it = map.emplace(key, off).first;
    }
    return rb_window + it->second;
}
inline void* rb_static_smem(const char* name, size_t bytes, size_t align) {
    RB_API;
    return rb_static_alloc(rb_hb().statics, std::string(name), name, bytes, align);
}
// A __shared__ declaration, rewritten by the build into
//   static RbSharedKey rb_shk_<name>; auto& <name> = rb_shared<type[dims]>(rb_shk_<name>, "<name>");
// The key (a static of the function, one per template instantiation, as the GPU allocates
// one array per instantiation) finds the array in the block's window: every block has its
// own, poisoned like the rest of the window.
struct RbSharedKey {
    char unused;
};
template <typename T> inline T& rb_shared(RbSharedKey& key, const char* name) {
    RB_API;
    return *static_cast<T*>(rb_static_alloc(rb_hb().keyed, static_cast<const void*>(&key), name,
                                            sizeof(T), alignof(T)));
}
#define RB_DYNAMIC_SMEM(name) unsigned char* name = rb_dynamic_smem()
#define RB_STATIC_SMEM(type, name, count) \
    type* name = static_cast<type*>(rb_static_smem(#name, sizeof(type) * (count), alignof(type)))

// The block's shared bytes [addr, addr + n): dynamic area or static arrays; else fail.
inline unsigned char* rb_smem(unsigned addr, size_t n, const char* who) {
    const RbHopperBlock& hb = rb_hb();
    const bool dyn = addr >= RB_DYN_BASE && addr + n <= RB_DYN_BASE + hb.dyn_bytes;
    const bool stat = addr >= hb.static_base && addr + n <= hb.static_top;
    if (!dyn && !stat)
        rb_fail("%s: shared memory 0x%x..0x%zx is outside the block's allocation (dynamic "
                "%u bytes at 0x%x, static up to 0x%x)",
                who, addr, addr + n, hb.dyn_bytes, RB_DYN_BASE, hb.static_top);
    return rb_window + addr;
}

// ---------------------------------------------------------------------- mbarriers
constexpr uint64_t RB_MBAR_MAGIC = 0x5242415252414D42ull;

// The barrier at `addr`, checked: initialized, its object intact, and this thread ordered
// after the init and after a fence.mbarrier_init that follows it. Call with hb.m held.
RB_NOSAN RbMbar& rb_bar(unsigned addr, const char* op) {
    RbHopperBlock& hb = rb_hb();
    auto it = hb.bars.find(addr);
    if (it == hb.bars.end())
        rb_fail("%s on shared 0x%x: no mbarrier.init there", op, addr);
    RbMbar& b = *it->second;
    uint64_t m;
    std::memcpy(&m, rb_window + addr, 8);
    if (m != RB_MBAR_MAGIC)
        rb_fail("%s: the mbarrier object at shared 0x%x was overwritten by a plain store", op,
                addr);
    if (rb_me->vc.v[b.init_tid] < b.init_epoch)
        rb_fail("%s on mbarrier 0x%x without synchronizing with its init (thread %d)", op, addr,
                b.init_tid);
    if (b.fenced_clk == RB_NOT_FENCED ||
        (rb_me->tid != b.init_tid && rb_me->clk[b.init_tid] <= b.fenced_clk))
        rb_fail("%s on mbarrier 0x%x before a fence.mbarrier_init: no fence after its init "
                "(thread %d) is ordered before this use",
                op, addr, b.init_tid);
    return b;
}

RB_NOSAN void rb_bar_complete_if_done(RbMbar& b) {
    if (b.pending != 0 || b.tx != 0) return;
    for (auto& [dst, bytes] : b.landing) std::memcpy(rb_window + dst, bytes.data(), bytes.size());
    b.landing.clear();
    b.done.join(b.accum);
    b.accum = RbVc();
    ++b.phase;
    b.pending = (int)b.count;
    ++rb_stats.phases;
}

inline void rb_bar_tx(RbMbar& b, long long delta, const char* op) {
    rb_progress();
    b.tx += delta;
    if (b.tx >= (1 << 20) || b.tx <= -(1 << 20))
        rb_fail("%s: mbarrier 0x%x transaction count %lld is out of range", op, b.addr, b.tx);
}

RB_NOSAN void mbar_init(unsigned bar, unsigned count) {
    RB_API;
    RbHopperBlock& hb = rb_hb();
    std::lock_guard<std::mutex> lk(hb.m);
    if (bar % 8) rb_fail("mbarrier.init: shared 0x%x is not 8-byte aligned", bar);
    rb_smem(bar, 8, "mbarrier.init");
    if (count < 1 || count >= (1u << 20))
        rb_fail("mbarrier.init: count %u outside 1 .. 2^20-1", count);
    auto& slot = hb.bars[bar];
    if (!slot) {
        if (hb.slots == RB_SLOTS) rb_fail("more than %d mbarriers (not modelled)", RB_SLOTS);
        slot = std::make_unique<RbMbar>();
        slot->slot = rb_blk->nthreads + hb.slots++;
    }
    RbMbar& b = *slot;
    b.addr = bar;
    b.count = count;
    b.pending = (int)count;
    b.tx = 0;
    b.phase = 0;
    b.accum = RbVc();
    b.done = RbVc();
    b.init_tid = rb_me->tid;
    b.init_epoch = rb_me->vc.v[rb_me->tid];
    b.fenced_clk = RB_NOT_FENCED;
    std::memcpy(rb_window + bar, &RB_MBAR_MAGIC, 8);
}
// fence.mbarrier_init: the inits this thread made so far become visible (to the async proxy
// and, once ordered, to the other threads); later work is newer than the fence.
inline void mbar_init_fence() {
    RB_API;
    RbHopperBlock& hb = rb_hb();
    {
        std::lock_guard<std::mutex> lk(hb.m);
        for (auto& kv : hb.bars) {
            RbMbar& b = *kv.second;
            if (b.init_tid == rb_me->tid && b.fenced_clk == RB_NOT_FENCED)
                b.fenced_clk = rb_me->clk[rb_me->tid];
        }
    }
    rb_me->release();
}

inline void rb_arrive(unsigned bar, unsigned tx, const char* op) {
    RB_API;
    RbHopperBlock& hb = rb_hb();
    {
        std::lock_guard<std::mutex> lk(hb.m);
        RbMbar& b = rb_bar(bar, op);
        if (b.pending == 0)
            rb_fail("%s: more arrivals on mbarrier 0x%x than its count %u in phase %u", op, bar,
                    b.count, b.phase);
        b.accum.join(rb_me->vc);
        rb_bar_tx(b, tx, op);
        --b.pending;
        rb_bar_complete_if_done(b);
    }
    rb_progress();
    rb_me->release();
}
inline void mbar_expect_tx(unsigned bar, unsigned bytes) {
    rb_arrive(bar, bytes, "mbarrier.arrive.expect_tx");
}
inline void mbar_arrive(unsigned bar) { rb_arrive(bar, 0, "mbarrier.arrive"); }

// try_wait.parity: true once the phase has completed; else the block's other threads run
// (they bring the arrivals and bytes) and it looks again, and returns false if the phase is
// still open (the kernel's loop calls it again), as the instruction may.
// Call with hb.m held: whether the phase of `parity` has completed; if so this thread is
// ordered after it (its clock joins the phase's) and no longer waits.
RB_NOSAN bool rb_phase_done(RbMbar& b, unsigned parity, RbHopperThread& ht) {
    if ((b.phase & 1) == (parity & 1)) return false;
    rb_me->vc.join(b.done);
    b.waited_seq = std::max<uint64_t>(b.waited_seq, b.done.v[b.slot]);
    ht.wait_bar = ~0u;
    rb_progress();
    return true;
}
inline bool mbar_try_wait(unsigned bar, unsigned parity) {
    RB_API;
    RbHopperBlock& hb = rb_hb();
    RbHopperThread& ht = rb_ht();
    ++rb_stats.waits;
    {
        std::lock_guard<std::mutex> lk(hb.m);
        if (rb_phase_done(rb_bar(bar, "mbarrier.try_wait.parity"), parity, ht)) return true;
    }
    rb_fiber_yield_waiting();
    if (rb_aborted()) throw RbTrap{};
    std::lock_guard<std::mutex> lk(hb.m);
    RbMbar& b = rb_bar(bar, "mbarrier.try_wait.parity");
    if (rb_phase_done(b, parity, ht)) return true;
    // The emulator's own bound, for builds without RB_BOUNDED_WAIT.
    const long long now = rb_now_ns();
    if (ht.wait_bar != bar || ht.wait_parity != parity) {
        ht.wait_bar = bar;
        ht.wait_parity = parity;
        ht.wait_since_ns = now;
    } else if ((now - ht.wait_since_ns) * 1e-9 > rb_hang_limit_s.load()) {
        rb_fail("mbarrier 0x%x: the phase of parity %u has not completed for %.0f s "
                "(phase %u, %d arrivals pending, tx-count %lld)",
                bar, parity, rb_hang_limit_s.load(), b.phase, b.pending, b.tx);
    }
    return false;
}

// ------------------------------------------------------------------ fences, barriers
// fence.proxy.async: this thread's generic-proxy stores so far become visible to the async
// proxy (checks.h reads the fence clocks when a wgmma reads what a plain store wrote).
inline void fence_proxy_async() {
    RB_API;
    RbThread& me = *rb_me;
    const uint32_t n = me.nfences.load(std::memory_order_relaxed);
    me.fence_clk[n % RB_FENCE_RING] = me.clk[me.tid];
    me.nfences.store(n + 1, std::memory_order_release);
    me.release();
}
inline void named_barrier_sync(unsigned id, unsigned count) {
    RB_API;
    if (count % 32 || count == 0 || (int)count > rb_blk->nthreads)
        rb_fail("bar.sync %u, %u: the count must be whole warps of the block", id, count);
    RbBarrier* b;
    {
        std::lock_guard<std::mutex> lk(rb_blk->named_m);
        auto& slot = rb_blk->named[id];
        if (!slot) slot = std::make_unique<RbBarrier>((int)count, "bar.sync");
        if (slot->count() != (int)count)
            rb_fail("bar.sync %u used with counts %d and %u", id, slot->count(), count);
        b = slot.get();
    }
    b->arrive_and_wait(true);
}

inline int rb_launch_regs() { return 65536 / rb_blk->nthreads / 8 * 8; }
inline void rb_setmaxnreg(int regs, bool inc) {
    RB_API;
    if (regs % 8 || regs < 24 || regs > 256)
        rb_fail("setmaxnreg %d: must be a multiple of 8 in 24..256", regs);
    const int wg = rb_me->tid / 128;
    const int base = rb_launch_regs();
    if (inc ? regs < base : regs > base)
        rb_fail("setmaxnreg.%s %d against the launch budget of %d registers",
                inc ? "inc" : "dec", regs, base);
    RbHopperBlock& hb = rb_hb();
    std::lock_guard<std::mutex> lk(hb.m);
    if (hb.maxnreg[wg] && hb.maxnreg[wg] != regs)
        rb_fail("setmaxnreg: warpgroup %d asks for %d and %d", wg, hb.maxnreg[wg], regs);
    hb.maxnreg[wg] = regs;
}
template <int REGS> inline void setmaxnreg_dec() { rb_setmaxnreg(REGS, false); }
template <int REGS> inline void setmaxnreg_inc() { rb_setmaxnreg(REGS, true); }

// -------------------------------------------------------------------------- TMA
void rb_tma_check_global(const RbTensorMap& tm, const char* op);
void rb_plain_before_async_write(unsigned dst, unsigned bytes, const char* op);
RB_NOSAN void tma_load_2d(unsigned dst, const void* map, int c0, int c1, unsigned bar) {
    RB_API;
    const RbTensorMap& tm = *static_cast<const RbTensorMap*>(map);
    const char* op = "cp.async.bulk.tensor.2d";
    if (tm.magic != RB_TMAP_MAGIC)
        rb_fail("%s: the tensor map was not made by cuTensorMapEncodeTiled", op);
    if (tm.rank != 2) rb_fail("%s: a rank-%u tensor map", op, tm.rank);
    if (tm.interleave != 0 || tm.elem_strides[0] != 1 || tm.elem_strides[1] != 1)
        rb_fail("%s: interleaved maps and element strides other than 1 are not modelled", op);
    const unsigned e = tm.elem_bytes, row = tm.box[0] * e, bytes = row * tm.box[1];
    static const unsigned mode_of[4] = {0, 3, 2, 1};  // CU_TENSOR_MAP_SWIZZLE_* -> gmma mode
    const unsigned mode = mode_of[tm.swizzle & 3];
    if (mode && row != rb_gmma_width(mode) * 16)
        rb_fail("%s: box rows of %u bytes with the %u-byte swizzle are not modelled", op, row,
                rb_gmma_width(mode) * 16);
    if (dst % 128) rb_fail("%s: shared destination 0x%x is not 128-byte aligned", op, dst);
    unsigned char* out = rb_smem(dst, bytes, op);
    RbHopperBlock& hb = rb_hb();
    std::lock_guard<std::mutex> lk(hb.m);
    for (auto& kv : hb.bars)
        if (kv.first + 8 > dst && kv.first < dst + bytes)
            rb_fail("%s into shared 0x%x..0x%x overwrites the mbarrier at 0x%x", op, dst,
                    dst + bytes, kv.first);
    RbMbar& b = rb_bar(bar, op);
    rb_tma_check_global(tm, op);
    rb_plain_before_async_write(dst, bytes, op);
    // Overwriting what a wgmma read: its group must be retired, and the retirement ordered
    // before this write (the readers released the stage through a barrier this thread saw).
    const int nwg = rb_blk->nthreads / 128;
    for (unsigned li = dst / RB_LINE; li <= (dst + bytes - 1) / RB_LINE; ++li) {
        RbLine& ln = hb.lines[li];
        for (int wg = 0; wg < nwg; ++wg) {
            const uint32_t g = ln.read_group[wg].load(std::memory_order_relaxed);
            if (!g) continue;
            for (int i = 128 * wg; i < 128 * wg + 128; ++i) {
                RbHopperThread& r = *hb.th[i];
                if (r.retired.load() < g)
                    rb_fail("%s into shared 0x%x..0x%x overwrites operands that wgmma group "
                            "%u of warpgroup %d still reads (thread %d has not waited for it)",
                            op, dst, dst + bytes, g, wg, i);
                if (g + RB_RING > r.retired.load() &&
                    rb_me->vc.v[i] < r.retire_epoch[g % RB_RING].load())
                    rb_fail("%s into shared 0x%x..0x%x is not ordered after the wait_group of "
                            "wgmma group %u of warpgroup %d (thread %d): the stage was not "
                            "released to this thread",
                            op, dst, dst + bytes, g, wg, i);
            }
            ln.read_group[wg].store(0, std::memory_order_relaxed);
        }
    }
    const uint64_t seq = ++b.tma_seq;
    for (unsigned li = dst / RB_LINE; li <= (dst + bytes - 1) / RB_LINE; ++li) {
        hb.lines[li].tma.store(((uint64_t)b.slot << 48) | seq, std::memory_order_relaxed);
        hb.lines[li].plain.store(0, std::memory_order_relaxed);
    }
    // The box, row-major, out-of-bounds elements zero, swizzled by shared address. It is not
    // visible before the phase completes: the destination reads 0xFF (NaN) until then.
    const unsigned char* g = reinterpret_cast<const unsigned char*>(tm.addr);
    std::vector<unsigned char> box(bytes);
    for (unsigned y = 0; y < tm.box[1]; ++y) {
        const long long gy = (long long)c1 + y;
        for (unsigned x = 0; x < tm.box[0]; ++x) {
            const long long gx = (long long)c0 + x;
            unsigned char* p = &box[rb_swizzle(dst + y * row + x * e, mode) - dst];
            if (gx >= 0 && gy >= 0 && (uint64_t)gx < tm.dims[0] &&
                (uint64_t)gy < tm.dims[1]) {
                std::memcpy(p, g + gy * tm.strides[0] + gx * e, e);
                rb_count_global(g + gy * tm.strides[0] + gx * e, e, false);
            }
            else
                std::memset(p, 0, e);
        }
    }
    std::memset(out, 0xFF, bytes);
    b.landing.emplace_back(dst, std::move(box));
    b.accum.join(rb_me->vc);
    b.accum.v[b.slot] = std::max<uint32_t>(b.accum.v[b.slot], (uint32_t)seq);
    rb_bar_tx(b, -(long long)bytes, op);
    rb_bar_complete_if_done(b);
    ++rb_stats.tma;
    rb_stats.tma_bytes += bytes;
}

// ------------------------------------------------------------------------- wgmma
// Operand values: fp16 / bf16 / e4m3 bits -> float, decoded here from the formats' bits
// (tables built once).
inline float rb_f16_bits(uint16_t h) {
    const int s = h >> 15, ex = (h >> 10) & 31, m = h & 1023;
    float v = ex == 0 ? std::ldexp((float)m, -24)
              : ex == 31 ? (m ? NAN : INFINITY)
                         : std::ldexp((float)(m | 1024), ex - 25);
    return s ? -v : v;
}
inline float rb_e4m3_bits(uint8_t b) {
    const int s = b >> 7, ex = (b >> 3) & 15, m = b & 7;
    float v = ex == 15 && m == 7 ? NAN
              : ex == 0          ? std::ldexp((float)m, -9)
                                 : std::ldexp((float)(m | 8), ex - 10);
    return s ? -v : v;
}
enum RbWgKind { RB_WG_F16 = 0, RB_WG_BF16 = 1, RB_WG_E4M3 = 2 };
// The value table of a kind, indexed by the element's bits.
inline const float* rb_values(int kind) {
    static const std::vector<float> f16 = [] {
        std::vector<float> t(65536);
        for (int i = 0; i < 65536; ++i) t[i] = rb_f16_bits((uint16_t)i);
        return t;
    }();
    static const std::vector<float> bf16 = [] {
        std::vector<float> t(65536);
        for (uint32_t i = 0; i < 65536; ++i) {
            const uint32_t u = i << 16;
            std::memcpy(&t[i], &u, 4);
        }
        return t;
    }();
    static const std::vector<float> e4m3 = [] {
        std::vector<float> t(256);
        for (int i = 0; i < 256; ++i) t[i] = rb_e4m3_bits((uint8_t)i);
        return t;
    }();
    return kind == RB_WG_F16 ? f16.data() : kind == RB_WG_BF16 ? bf16.data() : e4m3.data();
}

inline void wgmma_fence() { RB_API; rb_ht().fenced = true; }

// Element bits at a shared address (E bytes) and the operand bytes of an op.
template <int E> using RbBits = std::conditional_t<E == 1, uint8_t, uint16_t>;
template <int E> RB_NOSAN_INLINE inline RbBits<E> rb_bits(const unsigned char* win, uint32_t a) {
    RbBits<E> x;
    std::memcpy(&x, win + a, E);
    return x;
}

// wgmma.mma_async m64n256kK: this thread's share of D += A B. Per the PTX ISA's accumulator
// layout (m64nNk16 / k32, f32 D), thread t of the warpgroup (warp w, lane l) holds
// d[4j + 2h + p] = D[16w + l/4 + 8h][8j + 2(l % 4) + p], j < 32, h, p in {0, 1}.
void rb_async_read_of_plain(const RbAddrs& t, int e, const char* op);
template <int E>
RB_NOSAN void rb_wgmma_e(int kind, bool trans_b, float (&d)[128], uint64_t da, uint64_t db) {
    constexpr int K = 32 / E;
    RbHopperThread& ht = rb_ht();
    RbHopperBlock& hb = rb_hb();
    if (rb_blk->nthreads % 128)
        rb_fail("wgmma in a block of %d threads: not whole warpgroups", rb_blk->nthreads);
    if (!ht.fenced)
        rb_fail("wgmma.mma_async without a wgmma.fence since the registers were last accessed");
    if (E == 1 && trans_b) rb_fail("wgmma with 8-bit inputs has no transpose (B is K-major)");
    const int t = rb_me->tid % 128, wg = rb_me->tid / 128, w = t / 32, l = t % 32;
    RbWgOp op;
    op.d = d;
    op.e = E;
    // role 0: A (K-major), 1: B K-major, 2: B MN-major.
    RbAddrCache& cache = rb_addr_cache[t];
    auto table = [&](uint64_t desc, int role) -> RbAddrsPtr {
        const auto key = std::make_pair(desc, role * 4 + kind);
        {
            std::lock_guard<std::mutex> lk(cache.m);
            auto found = cache.tables.find(key);
            if (found != cache.tables.end()) return found->second;
        }
        auto tb = std::make_shared<RbAddrs>();
        auto at = [&](int mn, int k) {
            uint32_t a;
            if (!rb_gmma_addr(desc, role == 2, E, mn, k, &a))
                rb_fail("wgmma: descriptor 0x%016llx cannot address k = %d",
                        (unsigned long long)desc, k);
            tb->a.push_back(a);
            tb->lines.push_back(a / RB_LINE);
            tb->lo = std::min(tb->lo, a);
            tb->hi = std::max(tb->hi, a + E);
        };
        if (role == 0) {
            for (int h = 0; h < 2; ++h)
                for (int k = 0; k < K; ++k) at(16 * w + l / 4 + 8 * h, k);
        } else {
            for (int j = 0; j < 32; ++j)
                for (int p = 0; p < 2; ++p)
                    for (int k = 0; k < K; ++k) at(8 * j + 2 * (l % 4) + p, k);
        }
        std::sort(tb->lines.begin(), tb->lines.end());
        tb->lines.erase(std::unique(tb->lines.begin(), tb->lines.end()), tb->lines.end());
        std::lock_guard<std::mutex> lk(cache.m);
        if (cache.tables.size() > 4096) cache.tables.clear();
        return cache.tables[key] = tb;
    };
    op.a = table(da, 0);
    op.b = table(db, trans_b ? 2 : 1);
    rb_smem(op.a->lo, op.a->hi - op.a->lo, "wgmma.mma_async (A)");
    rb_smem(op.b->lo, op.b->hi - op.b->lo, "wgmma.mma_async (B)");
    // Ordering: every line read that TMA wrote must be ordered after that TMA's completion;
    // mark the lines as read by this warpgroup's next group.
    // Raw pointers in the loops below: a RB_NOSAN function cannot inline the instrumented
    // std:: accessors, and a call per element was most of a wgmma's emulation time.
    const uint32_t group = ht.committed + 1;
    RbLine* const lines = hb.lines.get();
    const uint32_t* const vc = rb_me->vc.v.data();
    for (const RbAddrs* tb : {op.a.get(), op.b.get()})
        for (const uint32_t *li = tb->lines.data(), *end = li + tb->lines.size(); li != end;
             ++li) {
            RbLine& ln = lines[*li];
            const uint64_t tag = ln.tma.load(std::memory_order_relaxed);
            if (tag && vc[tag >> 48] < (uint32_t)(tag & 0xFFFFFFFFFFFFull)) {
                unsigned bar = 0;
                for (auto& kv : hb.bars)
                    if ((uint64_t)kv.second->slot == tag >> 48) bar = kv.first;
                rb_fail("wgmma reads shared 0x%x, written by a TMA completing on mbarrier "
                        "0x%x, without having waited for that phase",
                        *li * RB_LINE, bar);
            }
            uint32_t cur = ln.read_group[wg].load(std::memory_order_relaxed);
            while (cur < group && !ln.read_group[wg].compare_exchange_weak(cur, group)) {
            }
        }
    // Bytes a plain store wrote: ordered before this read, and fenced (fence.proxy.async).
    rb_async_read_of_plain(*op.a, E, "wgmma.mma_async (A)");
    rb_async_read_of_plain(*op.b, E, "wgmma.mma_async (B)");
    // Read the operands now (and keep their bits: they must not change until retirement).
    const float* val = rb_values(kind);
    float av[2 * K], bv[64 * K];
    op.snap.resize((2 * K + 64 * K) * E);
    RbBits<E>* snap = reinterpret_cast<RbBits<E>*>(op.snap.data());
    const unsigned char* const win = rb_window;
    const uint32_t *const aa = op.a->a.data(), *const ba = op.b->a.data();
    for (int i = 0; i < 2 * K; ++i) av[i] = val[snap[i] = rb_bits<E>(win, aa[i])];
    for (int i = 0; i < 64 * K; ++i) bv[i] = val[snap[2 * K + i] = rb_bits<E>(win, ba[i])];
    auto it = ht.acc.find(d);
    if (it == ht.acc.end()) {
        it = ht.acc.emplace(d, RbAcc()).first;
        std::memcpy(it->second.v, d, sizeof(it->second.v));
    }
    RbAcc& acc = it->second;
    for (int j = 0; j < 32; ++j)
        for (int p = 0; p < 2; ++p) {
            const float* bc = bv + (2 * j + p) * K;
            for (int h = 0; h < 2; ++h) {
                const float* ar = av + h * K;
                float sum = 0.f;
                for (int k = 0; k < K; ++k) sum += ar[k] * bc[k];
                acc.v[4 * j + 2 * h + p] += sum;
            }
        }
    ++acc.pending;
    for (int i = 0; i < 128; ++i) d[i] = NAN;  // undefined until wait_group retires it
    ht.open.push_back(std::move(op));
    if (t == 0) {
        ++rb_stats.wgmma;
        rb_stats.flops += 2LL * 64 * 256 * K;
    }
}

template <int E> RB_NOSAN bool rb_operands_unchanged(const RbWgOp& op) {
    constexpr int K = 32 / E;
    const RbBits<E>* snap = reinterpret_cast<const RbBits<E>*>(op.snap.data());
    const unsigned char* const win = rb_window;
    const uint32_t *const aa = op.a->a.data(), *const ba = op.b->a.data();
    for (int i = 0; i < 2 * K; ++i)
        if (rb_bits<E>(win, aa[i]) != snap[i]) return false;
    for (int i = 0; i < 64 * K; ++i)
        if (rb_bits<E>(win, ba[i]) != snap[2 * K + i]) return false;
    return true;
}

inline void wgmma_commit() {
    RB_API;
    RbHopperThread& ht = rb_ht();
    ht.groups.push_back(std::move(ht.open));
    ht.open.clear();
    ++ht.committed;
}

template <int N> RB_NOSAN void wgmma_wait() {
    RB_API;
    RbHopperThread& ht = rb_ht();
    while ((int)ht.groups.size() > N) {
        for (RbWgOp& op : ht.groups.front()) {
            const bool same = op.e == 1 ? rb_operands_unchanged<1>(op) : rb_operands_unchanged<2>(op);
            if (!same)
                rb_fail("shared memory read by a wgmma (at 0x%x..0x%x) changed before the "
                        "wait_group that retires it",
                        std::min(op.a->lo, op.b->lo), std::max(op.a->hi, op.b->hi));
            RbAcc& acc = ht.acc.at(op.d);
            if (--acc.pending == 0) {
                std::memcpy(op.d, acc.v, sizeof(acc.v));
                ht.acc.erase(op.d);
            }
        }
        ht.groups.pop_front();
        const uint32_t g = ht.retired.load() + 1;
        ht.retire_epoch[g % RB_RING].store(rb_me->vc.v[rb_me->tid]);
        ht.retired.store(g);
    }
    ht.fenced = false;
}

inline void rb_wgmma(int kind, bool trans_b, float (&d)[128], uint64_t da, uint64_t db) {
    RB_API;
    if (kind == RB_WG_E4M3)
        rb_wgmma_e<1>(kind, trans_b, d, da, db);
    else
        rb_wgmma_e<2>(kind, trans_b, d, da, db);
}

template <int TRANS_B>
inline void wgmma_m64n256k16_f16(float (&d)[128], uint64_t da, uint64_t db) {
    rb_wgmma(RB_WG_F16, TRANS_B, d, da, db);
}
template <int TRANS_B>
inline void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t da, uint64_t db) {
    rb_wgmma(RB_WG_BF16, TRANS_B, d, da, db);
}
inline void wgmma_m64n256k32_e4m3(float (&d)[128], uint64_t da, uint64_t db) {
    rb_wgmma(RB_WG_E4M3, false, d, da, db);
}

// --------------------------------------------------------------- block lifecycle
void rb_hopper_launch_begin() {
    rb_stats.wgmma = rb_stats.flops = rb_stats.tma = rb_stats.tma_bytes = 0;
    rb_stats.phases = rb_stats.waits = 0;
}

RB_NOSAN void rb_hopper_block_begin(RbBlock& blk, unsigned dynamic_smem) {
    auto* hb = new RbHopperBlock();
    hb->dyn_bytes = dynamic_smem;
    hb->static_base = hb->static_top = (RB_DYN_BASE + dynamic_smem + 15) / 16 * 16;
    hb->lines.reset(new RbLine[RB_SMEM_WINDOW / RB_LINE]);
    for (unsigned i = 0; i < RB_SMEM_WINDOW / RB_LINE; ++i) {
        for (auto& g : hb->lines[i].read_group) g.store(0);
        hb->lines[i].tma.store(0);
        hb->lines[i].plain.store(0);
    }
    for (int i = 0; i < blk.nthreads; ++i) hb->th.push_back(std::make_unique<RbHopperThread>());
    blk.smem = rb_windows[blk.slot];
    std::memset(blk.smem, 0xFF, RB_SMEM_WINDOW);  // poison: NaN in every float type
    blk.hopper = hb;
}

void rb_hopper_thread_end() {
    RbHopperThread& ht = rb_ht();
    if (!ht.open.empty() || !ht.groups.empty())
        rb_fail("the thread ended with wgmma operations that no wait_group retired");
}

void rb_checks_block_end(RbBlock& blk, unsigned top);
std::string rb_hopper_block_end(RbBlock& blk) {
    std::unique_ptr<RbHopperBlock> hb(static_cast<RbHopperBlock*>(blk.hopper));
    rb_checks_block_end(blk, hb->static_top);
    blk.hopper = nullptr;
    char msg[256] = "";
    int regs = 0;
    for (int wg = 0; wg < blk.nthreads / 128; ++wg)
        regs += 128 * (hb->maxnreg[wg] ? hb->maxnreg[wg] : 65536 / blk.nthreads / 8 * 8);
    if (regs > 65536)
        snprintf(msg, sizeof msg, "setmaxnreg budgets need %d registers, the SM has 65536", regs);
    // Work in flight when the block ends: on the GPU a TMA still writing the freed shared
    // memory (the next block's), or a phase that some thread was part way through.
    for (auto& kv : hb->bars) {
        const RbMbar& b = *kv.second;
        if (msg[0]) break;
        if (b.tx > 0)
            snprintf(msg, sizeof msg,
                     "mbarrier 0x%x ends with %lld expected transaction bytes that never came",
                     kv.first, b.tx);
        else if (b.tma_seq > b.waited_seq)
            snprintf(msg, sizeof msg,
                     "the block ends with a TMA on mbarrier 0x%x that no thread waited for "
                     "(%llu of its %llu copies unobserved): a bulk copy in flight at exit",
                     kv.first, (unsigned long long)(b.tma_seq - b.waited_seq),
                     (unsigned long long)b.tma_seq);
        else if (b.pending != (int)b.count)
            snprintf(msg, sizeof msg,
                     "the block ends with mbarrier 0x%x part way through phase %u (%d of its "
                     "%u arrivals pending)",
                     kv.first, b.phase, b.pending, b.count);
    }
    return msg;
}

extern "C" int rb_emu_stats(long long* out, int n) {
    const long long v[6] = {rb_stats.wgmma, rb_stats.flops, rb_stats.tma, rb_stats.tma_bytes,
                            rb_stats.phases, rb_stats.waits};
    for (int i = 0; i < n && i < 6; ++i) out[i] = v[i];
    return 6;
}
extern "C" void rb_emu_set_hang_limit(double seconds) { rb_hang_limit_s = seconds; }

// Device printf (after every host header, so that only kernel code sees it).
#define printf rb_printf
