// A host emulation of the CUDA execution model, just enough to run roofbench's kernels on a
// CPU for correctness (never for speed): two blocks in flight at a time, each on an OS thread
// of its own with its own shared-memory window (poisoned before the block starts), its CUDA
// threads fibers of that OS thread (a barrier is a switch to the next ready thread, not a
// wake-up by the OS scheduler); __syncthreads as a block barrier, warp shuffles (with their masks) and
// mma.sync through per-warp exchange buffers. The mma emulation reconstructs the A/B matrices
// from the lanes' fragment registers with the layouts of the PTX ISA ("Matrix fragments for
// mma.m16n8k16 / m16n8k32"), so it checks the kernel's fragment loads, tiling and epilogue
// against the documented layout.
//
// Hopper (sm_90a) kernels: hopper_emu.h (included at the end) implements the primitives of
// kernels/cuda/hopper_ops.cuh (mbarriers, TMA, wgmma) over the block's shared-memory window.
// checks.h sees every load and store of the kernel code (the build instruments it with
// -fsanitize=thread, whose callbacks it defines): global buffers bounds-checked,
// plain shared-memory accesses checked for races (happens-before) and for the async proxy.
//
// Failures never hang or kill the process: __trap() and every error the emulation detects
// abort the block (blocked threads wake and unwind) and the launch returns non-zero with the
// message (rb_last_error); so does a block whose threads all wait at barriers that the
// others never reach (a deadlock: on the GPU, a hang). Every thread carries a vector clock, joined through barriers and
// mbarriers, so that the emulation can tell whether an access is ordered after another
// one (a happens-before check, independent of how the OS happened to schedule the threads).
// Functions marked RB_NOSAN are not instrumented: the emulator's own accesses to the shared
// window (TMA landing, wgmma operand reads) are not the kernel's plain accesses.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csetjmp>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <ucontext.h>
#include <deque>
#include <functional>
#include <time.h>
#include <tuple>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <vector_functions.h>
#include <vector_types.h>

#define RB_HOST_EMU 1
#undef __global__
#undef __device__
#undef __shared__
#undef __forceinline__
#undef __grid_constant__
#define __global__
#define __device__
#define __forceinline__ inline
// A __shared__ declaration: the test build (tests/standins/cuda_tools.py) rewrites each one
// into a reference to the block's shared window (rb_shared below); a marker left over fails
// the build.
#define __shared__ __rb_shared__
#define RB_NOSAN __attribute__((no_sanitize_thread, noinline))
#define RB_NOSAN_INLINE __attribute__((no_sanitize_thread))
#define __grid_constant__
#define __launch_bounds__(...)
#define __restrict__ __restrict

// threadIdx & co. are values, not memory, to the kernel (a call to an uninstrumented function):
// a thread-local variable of a dlopen'ed library lives in the heap, where a read of it would
// look like an access near some global buffer.
static thread_local uint3 rb_thread_idx, rb_block_idx;
static thread_local dim3 rb_block_dim, rb_grid_dim;
__attribute__((no_sanitize_thread, noinline)) uint3 rb_get_thread_idx() { return rb_thread_idx; }
__attribute__((no_sanitize_thread, noinline)) uint3 rb_get_block_idx() { return rb_block_idx; }
__attribute__((no_sanitize_thread, noinline)) dim3 rb_get_block_dim() { return rb_block_dim; }
__attribute__((no_sanitize_thread, noinline)) dim3 rb_get_grid_dim() { return rb_grid_dim; }
#define threadIdx (rb_get_thread_idx())
#define blockIdx (rb_get_block_idx())
#define blockDim (rb_get_block_dim())
#define gridDim (rb_get_grid_dim())

// ---------------------------------------------------------------------- failures
struct RbTrap {};  // unwinds an emulated thread after the block was aborted

struct RbVc;
struct RbBlock;
static thread_local RbBlock* rb_blk = nullptr;
static std::string rb_error;  // the last launch's failure (first one in the block)
static std::mutex rb_error_m;

[[noreturn]] void rb_fail(const char* fmt, ...);
bool rb_aborted();

// ------------------------------------------------------------------ vector clocks
// Component i < nthreads counts thread i's releases; the slots after them belong to the
// Hopper emulation (one per mbarrier that TMA completes on).
static int rb_vc_size = 0;
struct RbVc {
    std::vector<uint32_t> v;
    RbVc() : v(rb_vc_size, 0) {}
    // Unsanitized, raw pointers: joins run at every barrier and mbarrier arrive and wait.
    RB_NOSAN_INLINE void join(const RbVc& o) {
        uint32_t* a = v.data();
        const uint32_t* b = o.v.data();
        for (size_t i = 0, n = v.size(); i < n; ++i) a[i] = a[i] < b[i] ? b[i] : a[i];
    }
};

constexpr int RB_FENCE_RING = 256;  // fence.proxy.async clocks remembered per thread
struct RbThread {
    int tid = 0, lane = 0, warp = 0;
    RbVc vc;
    uint32_t* clk = nullptr;  // vc.v.data(): the checks read it without instrumented calls
    uint32_t bar_gen = 0;     // block-wide barriers passed
    // Set outside the kernel's own code (in the emulator's functions, in checks.h, before and
    // after the kernel): the instrumented accesses checks.h sees are then not the kernel's.
    bool in_check = true;
    // Where a failed check returns to (the kernel's call): the sanitizer callbacks are
    // declared nothrow, so an error found in one cannot unwind through the kernel's frames.
    jmp_buf* out = nullptr;
    RbBlock* blk = nullptr;
    // fence.proxy.async: this thread's clock at its i-th fence, at fence_clk[i % RING]
    std::atomic<uint32_t> nfences{0};
    uint32_t fence_clk[RB_FENCE_RING];
    void* hopper = nullptr;  // hopper_emu.h's per-thread state
    void release() { ++clk[tid]; }  // after publishing vc (an arrive): later work is newer
};
static thread_local RbThread* rb_me = nullptr;
static thread_local uintptr_t rb_stack_lo = 0, rb_stack_hi = 0;  // this CUDA thread's stack

// RB_API at the top of every function the kernels call: what it accesses is the emulator's.
struct RbApi {
    RbThread* me;
    bool was = true;
    RB_NOSAN_INLINE RbApi() : me(rb_me) {
        if (me) {
            was = me->in_check;
            me->in_check = true;
        }
    }
    RB_NOSAN_INLINE ~RbApi() {
        if (me) me->in_check = was;
    }
};
#define RB_API RbApi rb_api_scope_

// ------------------------------------------------------------------------- fibers
// The CUDA threads of a block are fibers (ucontext) of the block slot's OS thread, switched
// only where a thread waits (barriers, warp exchanges, mbarrier waits): the thread_local
// state above (rb_me, rb_thread_idx, the stack bounds) is set at every switch, and a fiber
// never moves to another OS thread.
constexpr size_t RB_FIBER_STACK = 512 * 1024;  // a guard page below it
struct RbFiber {
    ucontext_t ctx;
    char* stack = nullptr;
    bool done = false, blocked = false;
    const char* waits = nullptr;  // the barrier a blocked thread waits at (deadlock message)
    uint64_t seen = 0;            // progress count at its last unsuccessful mbarrier wait
    int idle = 0;                 // unsuccessful waits in a row with no progress between
};
struct RbSched {
    ucontext_t main;
    std::vector<RbFiber> f;
    std::deque<int> ready;
    int cur = -1, nblocked = 0;
    uint64_t progress = 0;  // arrivals, releases and finished threads so far
    std::function<void()> run;  // a thread's body
};
static thread_local RbSched* rb_sched = nullptr;

static std::mutex rb_stacks_m;
static std::vector<char*> rb_stacks;  // fiber stacks kept between blocks and launches
RB_NOSAN char* rb_stack_take() {
    {
        std::lock_guard<std::mutex> lk(rb_stacks_m);
        if (!rb_stacks.empty()) {
            char* p = rb_stacks.back();
            rb_stacks.pop_back();
            return p;
        }
    }
    const size_t guard = 4096;
    void* p = mmap(nullptr, RB_FIBER_STACK + guard, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) {
        perror("roofbench cuda_emu: fiber stack");
        abort();
    }
    mprotect(p, guard, PROT_NONE);  // an overflow faults instead of writing a neighbour
    return static_cast<char*>(p) + guard;
}
RB_NOSAN void rb_stack_give(char* p) {
    std::lock_guard<std::mutex> lk(rb_stacks_m);
    rb_stacks.push_back(p);
}

RB_NOSAN void rb_fiber_out() {  // back to the slot's scheduler
    RbSched& s = *rb_sched;
    swapcontext(&s.f[s.cur].ctx, &s.main);
}
// Wait until rb_fiber_wake: the other threads run meanwhile.
RB_NOSAN void rb_fiber_block(const char* what) {
    RbSched& s = *rb_sched;
    RbFiber& f = s.f[s.cur];
    f.blocked = true;
    f.waits = what;
    ++s.nblocked;
    rb_fiber_out();
}
RB_NOSAN void rb_fiber_wake(int i) {
    RbSched& s = *rb_sched;
    RbFiber& f = s.f[i];
    if (!f.blocked) return;
    f.blocked = false;
    --s.nblocked;
    s.ready.push_back(i);
}
RB_NOSAN void rb_progress() { ++rb_sched->progress; }
// A wait that did not succeed (an mbarrier phase not yet complete): the other ready threads
// run, then this one tries again. When a whole round of them made no progress, every ready
// thread is such a wait: nothing in this block can complete the phase, so the wait sleeps a
// little (a bounded wait then trips on its clock without spinning a core for seconds).
RB_NOSAN void rb_fiber_yield_waiting() {
    RbSched& s = *rb_sched;
    RbFiber& f = s.f[s.cur];
    if (f.seen == s.progress) {
        if (++f.idle > 2) {
            const timespec ts{0, 200 * 1000};
            nanosleep(&ts, nullptr);
        }
    } else {
        f.idle = 0;
        f.seen = s.progress;
    }
    s.ready.push_back(s.cur);
    rb_fiber_out();
}

// A barrier over `n` threads of a block that aborts with the block; joins the participants'
// clocks.
class RbBarrier {
  public:
    explicit RbBarrier(int n, const char* what = "__syncthreads") : n_(n), what_(what) {}
    int count() const { return n_; }
    RB_NOSAN void arrive_and_wait(bool clocks) {
        if (clocks) {
            if (acc_.v.size() != rb_me->vc.v.size()) acc_ = RbVc();
            acc_.join(rb_me->vc);
        }
        rb_progress();
        const uint64_t g = gen_;
        if (++arrived_ == n_) {
            arrived_ = 0;
            if (clocks) {
                result_ = acc_;
                acc_ = RbVc();
            }
            ++gen_;
            for (int w : waiting_) rb_fiber_wake(w);
            waiting_.clear();
        } else {
            waiting_.push_back(rb_sched->cur);
            while (gen_ == g) {
                if (rb_aborted()) throw RbTrap{};
                rb_fiber_block(what_);
            }
        }
        if (clocks) {
            rb_me->vc.join(result_);
            rb_me->release();
        }
    }

  private:
    int n_, arrived_ = 0;
    const char* what_;
    uint64_t gen_ = 0;
    std::vector<int> waiting_;
    RbVc acc_, result_;
};

// --------------------------------------------------------------------- the block
struct RbBlock {
    int nthreads = 0;
    std::unique_ptr<RbBarrier> block;
    std::vector<std::unique_ptr<RbBarrier>> warps;
    std::vector<uint64_t> xchg;  // 32 x (6 words) per warp: shuffles and mma fragments
    std::atomic<bool> aborted{false};
    std::vector<std::unique_ptr<RbThread>> threads;
    std::mutex named_m;
    std::map<unsigned, std::unique_ptr<RbBarrier>> named;  // bar.sync id, count
    void* hopper = nullptr;  // hopper_emu.h's per-block state
    int slot = 0;                   // which of the launch's blocks in flight
    unsigned char* smem = nullptr;  // its shared window (shared address 0)
    uint3 idx{0, 0, 0};
};

bool rb_aborted() { return rb_blk->aborted.load(std::memory_order_relaxed); }

static char rb_kernel[128];  // the launched kernel's name (for the checks' messages)

[[noreturn]] void rb_fail(const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    {
        std::lock_guard<std::mutex> lk(rb_error_m);
        if (!rb_blk->aborted.exchange(true)) {
            char where[96];
            const size_t kn = strlen(rb_kernel);
            const bool named = kn && !strncmp(msg, rb_kernel, kn) && msg[kn] == ':';
            if (gridDim.y > 1 || gridDim.z > 1)
                snprintf(where, sizeof where, " (block %u, thread %u; block (%u, %u, %u))",
                         blockIdx.x, threadIdx.x, blockIdx.x, blockIdx.y, blockIdx.z);
            else
                snprintf(where, sizeof where, " (block %u, thread %u)", blockIdx.x, threadIdx.x);
            rb_error = (named || !kn ? "" : std::string(rb_kernel) + ": ") + msg + where;
        }
    }
    throw RbTrap{};
}

inline void __syncthreads() {
    RB_API;
    rb_blk->block->arrive_and_wait(true);
    ++rb_me->bar_gen;
}
inline void rb_warp_sync() { rb_blk->warps[rb_me->warp]->arrive_and_wait(false); }
RB_NOSAN_INLINE inline uint64_t* rb_slot(int lane) {
    return rb_blk->xchg.data() + (rb_me->warp * 32 + lane) * 6;
}
std::string rb_last_printf();  // this thread's last device printf (hopper_emu.h)
[[noreturn]] inline void __trap() {
    RB_API;
    fflush(stdout);
    const std::string said = rb_last_printf();
    if (said.empty()) rb_fail("__trap()");
    rb_fail("__trap() after: %s", said.substr(0, said.find_last_not_of('\n') + 1).c_str());
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

// CUDA's __byte_perm: result byte i = byte ((s >> 4i) & 7) of the 8 bytes {y:x}.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long b = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i)
        r |= (unsigned)((b >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
    return r;
}

// atomicAdd (global or shared): a read-modify-write of the host's atomics (the STREAM probe's
// read kernel keeps its sum live with one per warp).
template <typename T> inline T atomicAdd(T* p, T v) {
    return std::atomic_ref<T>(*p).fetch_add(v, std::memory_order_relaxed);
}

// clock64: the host's steady clock scaled by an emulated clock rate (cycles per ns), so that
// the kernels' cycle bounds become wall-time bounds a test can shorten (rb_emu_set_clock).
static std::atomic<double> rb_cycles_per_ns{0.2};
inline long long clock64() {
    using namespace std::chrono;
    static const auto t0 = steady_clock::now();
    const double ns = (double)duration_cast<nanoseconds>(steady_clock::now() - t0).count();
    return (long long)(ns * rb_cycles_per_ns.load());
}

// __shfl_xor_sync(mask, v, o): every lane of the warp calls it (the emulated warp exchanges
// through a barrier of 32). A lane that calls it with a mask that does not name it is an
// error (undefined on the GPU); reading a lane outside the mask yields poison: NaN for
// floating-point values, 0xA5 bytes for integers, 0xFF bytes for other types. The lanes of
// the mask must pass the same mask.
template <typename T> T rb_shfl_poison() {
    T r;
    if constexpr (std::is_floating_point_v<T>) {
        r = std::numeric_limits<T>::quiet_NaN();
    } else {
        std::memset(&r, std::is_integral_v<T> ? 0xA5 : 0xFF, sizeof r);
    }
    return r;
}
// The lanes of this thread's warp: 32, fewer in the last warp of a block that is not whole
// warps (legal on the GPU; a warp primitive whose mask names a lane the warp lacks is not).
RB_NOSAN_INLINE inline int rb_warp_lanes() {
    return std::min(32, rb_blk->nthreads - 32 * rb_me->warp);
}
// A warp primitive over `mask` in a partial warp: every lane it names must exist.
RB_NOSAN inline void rb_check_partial_warp(const char* op, unsigned mask) {
    const int lanes = rb_warp_lanes();
    if (lanes < 32 && (mask >> lanes) != 0)
        rb_fail("%s: %s with mask 0x%08x in a partial warp: warp %d of a block of %d threads has "
                "lanes 0-%d only (a full-mask warp primitive on a partial warp is undefined on "
                "the GPU)",
                rb_kernel, op, mask, rb_me->warp, rb_blk->nthreads, lanes - 1);
}
template <typename T> RB_NOSAN T __shfl_xor_sync(unsigned mask, T v, int o) {
    RB_API;
    static_assert(sizeof(T) <= 8, "");
    rb_check_partial_warp("__shfl_xor_sync", mask);
    const int lane = rb_me->lane;
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    rb_slot(lane)[0] = bits;
    rb_slot(lane)[1] = mask;
    rb_warp_sync();
    const int src = lane ^ (o & 31);
    bits = rb_slot(src)[0];
    const uint64_t src_mask = rb_slot(src)[1];
    rb_warp_sync();
    if (!((mask >> lane) & 1))
        rb_fail("%s: lane %d calls __shfl_xor_sync with mask 0x%08x, which does not name it",
                rb_kernel, lane, mask);
    if (!((mask >> src) & 1)) return rb_shfl_poison<T>();
    if (src_mask != mask)
        rb_fail("%s: __shfl_xor_sync of lane %d with mask 0x%08x, lane %d with mask 0x%08x",
                rb_kernel, lane, mask, src, (unsigned)src_mask);
    T r;
    std::memcpy(&r, &bits, sizeof(T));
    return r;
}

// mma.sync.m16n8k{16,32}.row.col.f32.<T>.<T>.f32 for the whole warp: every lane passes its
// fragments; D (this lane's 4 floats) += A (16 x K) * B (K x 8).
template <typename T>
RB_NOSAN void rb_emu_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    RB_API;
    rb_check_partial_warp("mma.sync (all 32 lanes)", 0xffffffffu);
    constexpr int E = sizeof(T), P = 4 / E, K = 32 / E, KH = K / 2;
    uint64_t* s = rb_slot(rb_me->lane);
    for (int i = 0; i < 4; ++i) s[i] = a[i];
    s[4] = b[0];
    s[5] = b[1];
    rb_warp_sync();
    auto elem = [&](int lane, int reg, int sub) -> float {
        unsigned w = (unsigned)rb_slot(lane)[reg];
        T v;
        std::memcpy(&v, reinterpret_cast<const char*>(&w) + sub * E, E);
        return float(v);
    };
    const int g = rb_me->lane >> 2, t = rb_me->lane & 3;
    for (int r = 0; r < 4; ++r) {
        const int row = g + (r >> 1) * 8, col = 2 * t + (r & 1);
        float acc = 0.f;
        for (int k = 0; k < K; ++k) {
            const float av = elem((row % 8) * 4 + (k % KH) / P, (row >= 8) + 2 * (k >= KH), k % P);
            const float bv = elem(col * 4 + (k % KH) / P, 4 + (k >= KH), k % P);
            acc += av * bv;
        }
        d[r] += acc;
    }
    rb_warp_sync();
}

// The instruction string kernels/cuda/mma.cuh would hand to asm, checked against the C++
// type of the fragments it is instantiated with: the emulation computes with T, so an
// instruction whose shape or A/B types differ (".f16.f16" for bf16 fragments) would pass the
// values and give garbage on the GPU. Refused, naming both.
template <typename T> constexpr const char* rb_ptx_type() {
    if constexpr (std::is_same_v<T, __half>) return "f16";
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bf16";
    else if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) return "e4m3";
    else return "?";
}
template <typename T>
RB_NOSAN void rb_emu_mma_ptx(const char* instr, float (&d)[4], const unsigned (&a)[4],
                             const unsigned (&b)[2]) {
    {
        RB_API;
        const char* ty = rb_ptx_type<T>();
        char want[96];
        snprintf(want, sizeof want, "mma.sync.aligned.m16n8k%d.row.col.f32.%s.%s.f32",
                 (int)(32 / sizeof(T)), ty, ty);
        if (strcmp(instr, want) != 0)
            rb_fail("%s: '%s' on fragments of C++ %s: the instruction for them is '%s'",
                    rb_kernel, instr, ty, want);
    }
    rb_emu_mma<T>(d, a, b);
}

// Byte counting (cuda_emu/bytes_count.cpp, linked into the counting build only): the
// emulation's own global accesses that the compiler's instrumentation does not see (the TMA
// copies element by element with a run-time width). A no-op in every other build.
extern "C" void rb_bytes_access(const void* p, unsigned long long n, int store)
    __attribute__((weak));
inline void rb_count_global(const void* p, size_t n, bool store) {
    if (rb_bytes_access) rb_bytes_access(p, n, store);
}

// Hooks of the Hopper emulation around a launch and a block (defined in hopper_emu.h);
// block_end returns what is wrong with the finished block ("" when nothing).
void rb_hopper_launch_begin();
void rb_hopper_block_begin(RbBlock& blk, unsigned dynamic_smem);
void rb_hopper_thread_end();
std::string rb_hopper_block_end(RbBlock& blk);

// Run the grid with RB_IN_FLIGHT blocks at a time: each block slot is an OS thread whose
// fibers are the block's CUDA threads (stacks kept between its blocks), with its own shared
// window and shadow state; the slots take the blocks in order from a shared counter, so
// blocks 0 and 1 run at the same time (a kernel whose blocks wait for each other completes,
// as on a GPU with room for both).
constexpr int RB_IN_FLIGHT = 2;
void rb_checks_launch_begin(void* fn);
void rb_checks_launch_end();
void rb_checks_block_begin(RbBlock& blk);
void rb_fma_counts_reset();

static void rb_fiber_main() {
    RbSched& s = *rb_sched;
    const int i = s.cur;
    s.run();
    s.f[i].done = true;
    ++s.progress;
}  // returns to uc_link: the scheduler

// The block's threads until every one has finished: round robin over the ready ones. A
// block whose remaining threads all wait at barriers can never finish: it fails (those
// threads then wake and unwind, as they do when any thread fails).
RB_NOSAN void rb_run_block(RbSched& s, RbBlock& blk, int bx, int by) {
    const int n = blk.nthreads;
    for (int i = 0; i < n; ++i) {
        RbFiber& f = s.f[i];
        f.done = f.blocked = false;
        f.waits = nullptr;
        f.seen = 0;
        f.idle = 0;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = RB_FIBER_STACK;
        f.ctx.uc_link = &s.main;
        makecontext(&f.ctx, rb_fiber_main, 0);
        s.ready.push_back(i);
    }
    s.nblocked = 0;
    int finished = 0;
    while (finished < n) {
        if (s.ready.empty()) {
            if (!blk.aborted.load()) {
                std::lock_guard<std::mutex> lk(rb_error_m);
                if (!blk.aborted.exchange(true)) {
                    std::string who;
                    int shown = 0;
                    for (int i = 0; i < n; ++i)
                        if (s.f[i].blocked && shown++ < 4)
                            who += (who.empty() ? "" : ", ") + std::to_string(i) + " at " +
                                   s.f[i].waits;
                    rb_error = std::string(rb_kernel) + ": deadlock: " +
                               std::to_string(s.nblocked) + " of " + std::to_string(n) +
                               " threads wait at barriers the others never reach (thread " +
                               who + (s.nblocked > 4 ? ", ..." : "") + "; block " +
                               std::to_string(blk.idx.x) + ")";
                }
            }
            for (int i = 0; i < n; ++i) rb_fiber_wake(i);
            continue;
        }
        const int i = s.ready.front();
        s.ready.pop_front();
        RbFiber& f = s.f[i];
        s.cur = i;
        rb_me = blk.threads[i].get();
        rb_thread_idx = make_uint3(i % bx, (i / bx) % by, i / (bx * by));
        rb_stack_lo = (uintptr_t)f.stack;
        rb_stack_hi = (uintptr_t)f.stack + RB_FIBER_STACK;
        swapcontext(&s.main, &f.ctx);
        rb_me = nullptr;
        s.cur = -1;
        if (f.done) ++finished;
        if (s.nblocked && blk.aborted.load(std::memory_order_relaxed))
            for (int j = 0; j < n; ++j) rb_fiber_wake(j);
    }
}

template <typename Body>
static int rb_run_grid(void* fn, int gx, int gy, int gz, int bx, int by, int bz,
                       unsigned dynamic_smem, Body body) {
    const int nthreads = bx * by * bz;
    const int nwarps = (nthreads + 31) / 32;
    rb_error.clear();
    // As the driver refuses them (cudaErrorInvalidConfiguration): a block of more than 1024
    // threads, or a dimension past its limit. A block that is not whole warps is legal: its
    // last warp is partial (the warp primitives check their masks against it).
    if (nthreads < 1 || nthreads > 1024 || bx > 1024 || by > 1024 || bz > 64 || gx < 1 ||
        gy < 1 || gz < 1 || gy > 65535 || gz > 65535) {
        rb_error = "invalid launch configuration: block (" + std::to_string(bx) + ", " +
                   std::to_string(by) + ", " + std::to_string(bz) + "), grid (" +
                   std::to_string(gx) + ", " + std::to_string(gy) + ", " + std::to_string(gz) +
                   "): at most 1024 threads a block (z at most 64), grid y and z at most 65535";
        rb_checks_launch_end();
        return 1;
    }
    rb_vc_size = nthreads + 64;
    rb_fma_counts_reset();
    rb_checks_launch_begin(fn);
    rb_hopper_launch_begin();
    const long long nblocks = (long long)gx * gy * gz;
    std::atomic<long long> next{0};
    std::atomic<int> rc{0};
    auto slot_main = [&](int slot) {
        // checks.h rb_fault runs here: a fault of the kernel's code, even on a fiber stack it
        // overflowed, fails the launch (the caller's own alternate stack comes back after)
        std::vector<char> alt(64 * 1024);
        stack_t ss{}, old_ss{};
        ss.ss_sp = alt.data();
        ss.ss_size = alt.size();
        sigaltstack(&ss, &old_ss);
        RbSched s;
        s.f.resize(nthreads);
        for (auto& f : s.f) f.stack = rb_stack_take();
        s.run = [&] {
            try {
                body();
                if (!rb_aborted()) rb_hopper_thread_end();
            } catch (RbTrap&) {
            } catch (std::exception& e) {
                try {
                    rb_fail("host exception: %s", e.what());
                } catch (RbTrap&) {
                }
            }
        };
        RbSched* const outer = rb_sched;
        rb_sched = &s;
        for (;;) {
            const long long b = next.fetch_add(1);
            if (b >= nblocks || rc.load()) break;
            RbBlock blk;
            blk.slot = slot;
            blk.idx = make_uint3((unsigned)(b % gx), (unsigned)(b / gx % gy),
                                 (unsigned)(b / ((long long)gx * gy)));
            blk.nthreads = nthreads;
            blk.block = std::make_unique<RbBarrier>(nthreads);
            for (int w = 0; w < nwarps; ++w)
                blk.warps.push_back(std::make_unique<RbBarrier>(std::min(32, nthreads - 32 * w),
                                                                "a warp exchange"));
            blk.xchg.assign(nwarps * 32 * 6, 0);
            for (int i = 0; i < nthreads; ++i) {
                blk.threads.push_back(std::make_unique<RbThread>());
                RbThread& t = *blk.threads.back();
                t.tid = i;
                t.lane = i % 32;
                t.warp = i / 32;
                t.clk = t.vc.v.data();
                t.blk = &blk;
                t.vc.v[i] = 1;
            }
            rb_blk = &blk;
            rb_block_idx = blk.idx;
            rb_block_dim = dim3(bx, by, bz);
            rb_grid_dim = dim3(gx, gy, gz);
            rb_checks_block_begin(blk);
            rb_hopper_block_begin(blk, dynamic_smem);
            rb_run_block(s, blk, bx, by);
            const std::string why = rb_hopper_block_end(blk);
            if (!why.empty()) {
                std::lock_guard<std::mutex> lk(rb_error_m);
                if (!blk.aborted.exchange(true))
                    rb_error = std::string(rb_kernel) + ": " + why + " (block " +
                               std::to_string(blk.idx.x) + ")";
            }
            rb_blk = nullptr;
            if (blk.aborted) rc = 2;
        }
        rb_sched = outer;
        for (auto& f : s.f) rb_stack_give(f.stack);
        sigaltstack(&old_ss, nullptr);
    };
    const int nslots = (int)std::min<long long>(RB_IN_FLIGHT, nblocks);
    std::vector<std::thread> slots;
    for (int s = 1; s < nslots; ++s) slots.emplace_back(slot_main, s);
    slot_main(0);
    for (auto& t : slots) t.join();
    rb_checks_launch_end();
    return rc.load();
}

// Launch through the generic x86-64 SysV signature: integer-class arguments (pointers, long
// long) go to the integer registers in order and floating-point arguments to xmm registers in
// order, whatever their interleaving in the real signature (at most 6 + 2 here). F is the
// scalars' type: float (rb_launch), or double (rb_launch_f64: the fp64 STREAM kernels'
// `double s`), which the xmm registers then hold as doubles.
template <typename F>
using rb_kernel_t = void (*)(long long, long long, long long, long long, long long, long long,
                             F, F);

// The call of the kernel itself: its arguments read, then the kernel's own code is checked.
// A check that fails inside the kernel's code comes back here (longjmp: nothing of the
// kernel's frames needs destroying; the block is already aborted) and returns: no exception
// is thrown from this frame (the unwinder does not survive one after the longjmp).
struct RbKernelScope {  // back to the emulator's side however the kernel's code is left
    RbThread* me;
    RB_NOSAN_INLINE ~RbKernelScope() {
        me->in_check = true;
        me->out = nullptr;
    }
};
template <typename Call> RB_NOSAN void rb_run_kernel(Call call) {
    jmp_buf out;
    RbKernelScope scope{rb_me};
    if (setjmp(out) == 0) {
        scope.me->out = &out;
        scope.me->in_check = false;
        call();
    }
}
template <typename F>
RB_NOSAN void rb_call_kernel(rb_kernel_t<F> k, const long long* ia, const F* fa) {
    const long long a0 = ia[0], a1 = ia[1], a2 = ia[2], a3 = ia[3], a4 = ia[4], a5 = ia[5];
    const F f0 = fa[0], f1 = fa[1];
    rb_run_kernel([&] { k(a0, a1, a2, a3, a4, a5, f0, f1); });
}
template <typename F>
int rb_launch_scalars(void* fn, int gx, int gy, int gz, int bx, int by, int bz,
                      const long long* ia, const F* fa) {
    rb_kernel_t<F> k = reinterpret_cast<rb_kernel_t<F>>(fn);
    return rb_run_grid(fn, gx, gy, gz, bx, by, bz, 0, [&] { rb_call_kernel(k, ia, fa); });
}

extern "C" int rb_launch(void* fn, int gx, int gy, int gz, int bx, int by, int bz,
                         const long long* ia, const float* fa) {
    return rb_launch_scalars(fn, gx, gy, gz, bx, by, bz, ia, fa);
}
extern "C" int rb_launch_f64(void* fn, int gx, int gy, int gz, int bx, int by, int bz,
                             const long long* ia, const double* fa) {
    return rb_launch_scalars(fn, gx, gy, gz, bx, by, bz, ia, fa);
}

// Launch as the driver does (cuLaunchKernel): `params[i]` points at the bytes of argument i.
// `thunk` is rb_params__<kernel> (RB_ENTRY below), which unpacks them into the typed call.
typedef void (*rb_thunk_t)(void**);
extern "C" int rb_launch_params(void* thunk, int gx, int gy, int gz, int bx, int by, int bz,
                                unsigned dynamic_smem, void** params) {
    rb_thunk_t f = reinterpret_cast<rb_thunk_t>(thunk);
    if (dynamic_smem > 227 * 1024) {  // an sm_90 block's opt-in maximum
        rb_error = "dynamic shared memory of " + std::to_string(dynamic_smem) +
                   " bytes is more than a block may have (232448)";
        rb_checks_launch_end();
        return 1;
    }
    return rb_run_grid(thunk, gx, gy, gz, bx, by, bz, dynamic_smem, [&] { f(params); });
}

extern "C" const char* rb_last_error() { return rb_error.c_str(); }
extern "C" void rb_emu_set_clock(double cycles_per_ns) { rb_cycles_per_ns = cycles_per_ns; }

template <typename... A, size_t... I>
RB_NOSAN void rb_call_params_impl(void (*f)(A...), void** p, std::index_sequence<I...>) {
    std::tuple<std::remove_cv_t<std::remove_reference_t<A>>...> args(
        *static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(p[I])...);
    rb_run_kernel([&] { f(std::get<I>(args)...); });
}
template <typename... A> void rb_call_params(void (*f)(A...), void** p) {
    rb_call_params_impl(f, p, std::index_sequence_for<A...>{});
}
// A kernel's parameter types as the driver reads them from the compiled image: one entry per
// parameter, "p" (a pointer), i/u/f (signed, unsigned, floating) and its bytes ("i8": long
// long, "f4": float), b1 (bool), s<bytes>a<alignment> (a struct by value: "s128a64", a tensor
// map). The test build appends an rb_sig__<name>() returning it for every extern "C" kernel
// (cuda_tools.with_signatures); the launchers compare each scalar they hand over
// (fake_cupy/emu_launch.py check_scalars), and the stand-in driver's cuFuncGetParamInfo
// answers from it (the sizes roofbench's driver launches are checked against): a 4-byte int
// for a `long long` reads 4 bytes of whatever follows on the GPU.
template <typename T> std::string rb_sig_one() {
    using U = std::remove_cv_t<T>;
    const std::string n = std::to_string(sizeof(U));
    if constexpr (std::is_pointer_v<U>) return "p";
    else if constexpr (std::is_same_v<U, bool>) return "b1";
    else if constexpr (std::is_integral_v<U>) return (std::is_signed_v<U> ? "i" : "u") + n;
    else if constexpr (std::is_floating_point_v<U>) return "f" + n;
    else return "s" + n + "a" + std::to_string(alignof(U));
}
template <typename... A> const char* rb_signature(void (*)(A...)) {
    static const std::string s = [] {
        std::string r;
        ((r += (r.empty() ? "" : ",") + rb_sig_one<A>()), ...);
        return r;
    }();
    return s.c_str();
}

// The driver-style entry of a kernel, appended after the source by the test build.
#define RB_ENTRY(name) \
    extern "C" void rb_params__##name(void** p) { rb_call_params(name, p); }

#include "hopper_emu.h"
#include "checks.h"

// ------------------------------------------------------------------ FMAs counted
// What a probe executes, counted per launch (the FMA probe's roof divides by its FLOPs): the
// kernel code's fmaf and fma (macros below, after every host header) and the packed
// fma.rn.f16x2 / fma.rn.bf16x2 a probe's asm names (rb_emu_fma_x2 executes the instruction
// its string spells, element by element, rounded as the GPU rounds). Slots: fp32, fp64,
// f16x2, bf16x2 instructions.
static std::atomic<long long> rb_fma_ops[4];
RB_NOSAN float rb_fmaf(float x, float y, float z) {
    rb_fma_ops[0].fetch_add(1, std::memory_order_relaxed);
    return std::fma(x, y, z);
}
RB_NOSAN double rb_fma(double x, double y, double z) {
    rb_fma_ops[1].fetch_add(1, std::memory_order_relaxed);
    return std::fma(x, y, z);
}
template <typename H> RB_NOSAN_INLINE unsigned rb_fma_halves(unsigned y, unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 2; ++i) {
        H hy, ha, hb;
        const unsigned short sy = (unsigned short)(y >> (16 * i)), sa = (unsigned short)(a >> (16 * i)),
                             sb = (unsigned short)(b >> (16 * i));
        std::memcpy(&hy, &sy, 2);
        std::memcpy(&ha, &sa, 2);
        std::memcpy(&hb, &sb, 2);
        // One rounding of the exact product-sum: in double it is exact for 16-bit operands.
        const H v = H((float)std::fma((double)float(hy), (double)float(ha), (double)float(hb)));
        unsigned short sv;
        std::memcpy(&sv, &v, 2);
        r |= (unsigned)sv << (16 * i);
    }
    return r;
}
RB_NOSAN unsigned rb_emu_fma_x2(const char* op, unsigned y, unsigned a, unsigned b) {
    RB_API;
    if (!strcmp(op, "fma.rn.f16x2")) {
        rb_fma_ops[2].fetch_add(1, std::memory_order_relaxed);
        return rb_fma_halves<__half>(y, a, b);
    }
    if (!strcmp(op, "fma.rn.bf16x2")) {
        rb_fma_ops[3].fetch_add(1, std::memory_order_relaxed);
        return rb_fma_halves<__nv_bfloat16>(y, a, b);
    }
    rb_fail("%s: '%s' is not a packed FMA the emulation executes (fma.rn.f16x2, "
            "fma.rn.bf16x2)", rb_kernel, op);
}
// The counts of the last launch (reset when a launch begins); returns how many slots exist.
extern "C" int rb_emu_fma_counts(long long* out, int n) {
    for (int i = 0; i < n && i < 4; ++i) out[i] = rb_fma_ops[i].load();
    return 4;
}
void rb_fma_counts_reset() {
    for (auto& c : rb_fma_ops) c.store(0);
}
#define fmaf rb_fmaf
#define fma rb_fma

