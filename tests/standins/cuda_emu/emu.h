// A host emulation of the CUDA execution model, just enough to run roofbench's kernels on a
// CPU for correctness (never for speed): one OS thread per CUDA thread, blocks one after
// another, __shared__ as static storage (one block at a time shares it), __syncthreads as a
// block barrier, warp shuffles and mma.sync through per-warp exchange buffers. The mma
// emulation reconstructs the A/B matrices from the lanes' fragment registers with the layouts
// of the PTX ISA ("Matrix fragments for mma.m16n8k16 / m16n8k32"), so it checks the kernel's
// fragment loads, tiling and epilogue against the documented layout.
//
// Hopper (sm_90a) kernels: hopper_emu.h (included at the end) implements the primitives of
// kernels/cuda/hopper_ops.cuh (mbarriers, TMA, wgmma) over a per-block shared-memory window.
//
// Failures never hang or kill the process: __trap() and every error the emulation detects
// abort the block (blocked threads wake and unwind) and the launch returns non-zero with the
// message (rb_last_error). Every thread carries a vector clock, joined through barriers and
// mbarriers, so that the Hopper emulation can tell whether an access is ordered after another
// one (a happens-before check, independent of how the OS happened to schedule the threads).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
#define __shared__ static
#define __grid_constant__
#define __launch_bounds__(...)
#define __restrict__ __restrict

static thread_local uint3 threadIdx, blockIdx;
static thread_local dim3 blockDim, gridDim;

// ---------------------------------------------------------------------- failures
struct RbTrap {};  // unwinds an emulated thread after the block was aborted

struct RbVc;
struct RbBlock;
static RbBlock* rb_blk = nullptr;
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
    void join(const RbVc& o) {
        for (size_t i = 0; i < v.size(); ++i) v[i] = std::max(v[i], o.v[i]);
    }
};

struct RbThread {
    int tid = 0, lane = 0, warp = 0;
    RbVc vc;
    void* hopper = nullptr;  // hopper_emu.h's per-thread state
    void release() { ++vc.v[tid]; }  // after publishing vc (an arrive): later work is newer
};
static thread_local RbThread* rb_me = nullptr;

// A barrier over `n` threads that aborts with the block; joins the participants' clocks.
class RbBarrier {
  public:
    explicit RbBarrier(int n) : n_(n) {}
    int count() const { return n_; }
    void arrive_and_wait(bool clocks) {
        std::unique_lock<std::mutex> lk(m_);
        if (clocks) {
            if (acc_.v.size() != rb_me->vc.v.size()) acc_ = RbVc();
            acc_.join(rb_me->vc);
        }
        const uint64_t g = gen_;
        if (++arrived_ == n_) {
            arrived_ = 0;
            if (clocks) {
                result_ = acc_;
                acc_ = RbVc();
            }
            ++gen_;
            cv_.notify_all();
        } else {
            while (gen_ == g) {
                if (rb_aborted()) throw RbTrap{};
                cv_.wait_for(lk, std::chrono::milliseconds(20));
            }
        }
        if (clocks) {
            rb_me->vc.join(result_);
            rb_me->release();
        }
    }

  private:
    std::mutex m_;
    std::condition_variable cv_;
    int n_, arrived_ = 0;
    uint64_t gen_ = 0;
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
};

bool rb_aborted() { return rb_blk->aborted.load(std::memory_order_relaxed); }

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
            snprintf(where, sizeof where, " (block %u, thread %u)", blockIdx.x, threadIdx.x);
            rb_error = std::string(msg) + where;
        }
    }
    throw RbTrap{};
}

inline void __syncthreads() { rb_blk->block->arrive_and_wait(true); }
inline void rb_warp_sync() { rb_blk->warps[rb_me->warp]->arrive_and_wait(false); }
inline uint64_t* rb_slot(int lane) { return &rb_blk->xchg[(rb_me->warp * 32 + lane) * 6]; }
std::string rb_last_printf();  // this thread's last device printf (hopper_emu.h)
[[noreturn]] inline void __trap() {
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

template <typename T> T __shfl_xor_sync(unsigned, T v, int o) {
    static_assert(sizeof(T) <= 8, "");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    rb_slot(rb_me->lane)[0] = bits;
    rb_warp_sync();
    bits = rb_slot(rb_me->lane ^ o)[0];
    rb_warp_sync();
    T r;
    std::memcpy(&r, &bits, sizeof(T));
    return r;
}

// mma.sync.m16n8k{16,32}.row.col.f32.<T>.<T>.f32 for the whole warp: every lane passes its
// fragments; D (this lane's 4 floats) += A (16 x K) * B (K x 8).
template <typename T>
inline void rb_emu_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
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

// Run the grid: blocks in order, one std::thread per CUDA thread (the same OS threads serve
// every block of the launch), `body` per thread.
template <typename Body>
static int rb_run_grid(int gx, int gy, int gz, int bx, int by, int bz, unsigned dynamic_smem,
                       Body body) {
    const int nthreads = bx * by * bz;
    const int nwarps = (nthreads + 31) / 32;
    rb_error.clear();
    if (nthreads % 32 != 0) {  // the emulated warps need full warps
        rb_error = "block of " + std::to_string(nthreads) + " threads is not whole warps";
        return 1;
    }
    rb_vc_size = nthreads + 64;
    rb_hopper_launch_begin();
    std::mutex m;
    std::condition_variable start, finished;
    uint64_t gen = 0;
    int done = 0;
    bool quit = false;
    uint3 cur{0, 0, 0};
    RbBlock* blkp = nullptr;
    std::vector<std::thread> th;
    th.reserve(nthreads);
    for (int i = 0; i < nthreads; ++i)
        th.emplace_back([&, i] {
            uint64_t seen = 0;
            for (;;) {
                {
                    std::unique_lock<std::mutex> lk(m);
                    start.wait(lk, [&] { return gen != seen || quit; });
                    if (quit) return;
                    seen = gen;
                }
                threadIdx = make_uint3(i % bx, (i / bx) % by, i / (bx * by));
                blockIdx = cur;
                blockDim = dim3(bx, by, bz);
                gridDim = dim3(gx, gy, gz);
                rb_blk = blkp;
                rb_me = blkp->threads[i].get();
                try {
                    body();
                    rb_hopper_thread_end();
                } catch (RbTrap&) {
                } catch (std::exception& e) {
                    try {
                        rb_fail("host exception: %s", e.what());
                    } catch (RbTrap&) {
                    }
                }
                std::lock_guard<std::mutex> lk(m);
                if (++done == nthreads) finished.notify_one();
            }
        });
    int rc = 0;
    for (int z = 0; z < gz && !rc; ++z)
        for (int y = 0; y < gy && !rc; ++y)
            for (int x = 0; x < gx && !rc; ++x) {
                RbBlock blk;
                blk.nthreads = nthreads;
                blk.block = std::make_unique<RbBarrier>(nthreads);
                for (int w = 0; w < nwarps; ++w)
                    blk.warps.push_back(std::make_unique<RbBarrier>(32));
                blk.xchg.assign(nwarps * 32 * 6, 0);
                for (int i = 0; i < nthreads; ++i) {
                    blk.threads.push_back(std::make_unique<RbThread>());
                    RbThread& t = *blk.threads.back();
                    t.tid = i;
                    t.lane = i % 32;
                    t.warp = i / 32;
                    t.vc.v[i] = 1;
                }
                rb_blk = &blk;
                rb_hopper_block_begin(blk, dynamic_smem);
                {
                    std::unique_lock<std::mutex> lk(m);
                    cur = make_uint3(x, y, z);
                    blkp = &blk;
                    done = 0;
                    ++gen;
                    start.notify_all();
                    finished.wait(lk, [&] { return done == nthreads; });
                }
                const std::string why = rb_hopper_block_end(blk);
                if (!blk.aborted && !why.empty()) {
                    rb_error = why + " (block " + std::to_string(x) + ")";
                    blk.aborted = true;
                }
                rb_blk = nullptr;
                if (blk.aborted) rc = 2;
            }
    {
        std::lock_guard<std::mutex> lk(m);
        quit = true;
        start.notify_all();
    }
    for (auto& t : th) t.join();
    return rc;
}

// Launch through the generic x86-64 SysV signature: integer-class arguments (pointers, long
// long) go to the integer registers in order and float arguments to xmm registers in order,
// whatever their interleaving in the real signature (at most 6 + 2 here).
typedef void (*rb_kernel_t)(long long, long long, long long, long long, long long, long long,
                            float, float);

extern "C" int rb_launch(void* fn, int gx, int gy, int gz, int bx, int by, int bz,
                         const long long* ia, const float* fa) {
    rb_kernel_t k = reinterpret_cast<rb_kernel_t>(fn);
    return rb_run_grid(gx, gy, gz, bx, by, bz, 0, [&] {
        k(ia[0], ia[1], ia[2], ia[3], ia[4], ia[5], fa[0], fa[1]);
    });
}

// The same with double scalars (the fp64 STREAM kernels' `double s`): xmm registers hold them
// as doubles.
typedef void (*rb_kernel_f64_t)(long long, long long, long long, long long, long long,
                                long long, double, double);
extern "C" int rb_launch_f64(void* fn, int gx, int gy, int gz, int bx, int by, int bz,
                             const long long* ia, const double* fa) {
    rb_kernel_f64_t k = reinterpret_cast<rb_kernel_f64_t>(fn);
    return rb_run_grid(gx, gy, gz, bx, by, bz, 0, [&] {
        k(ia[0], ia[1], ia[2], ia[3], ia[4], ia[5], fa[0], fa[1]);
    });
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
        return 1;
    }
    return rb_run_grid(gx, gy, gz, bx, by, bz, dynamic_smem, [&] { f(params); });
}

extern "C" const char* rb_last_error() { return rb_error.c_str(); }
extern "C" void rb_emu_set_clock(double cycles_per_ns) { rb_cycles_per_ns = cycles_per_ns; }

template <typename... A, size_t... I>
void rb_call_params_impl(void (*f)(A...), void** p, std::index_sequence<I...>) {
    f(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(p[I])...);
}
template <typename... A> void rb_call_params(void (*f)(A...), void** p) {
    rb_call_params_impl(f, p, std::index_sequence_for<A...>{});
}
// The driver-style entry of a kernel, appended after the source by the test build.
#define RB_ENTRY(name) \
    extern "C" void rb_params__##name(void** p) { rb_call_params(name, p); }

#include "hopper_emu.h"
