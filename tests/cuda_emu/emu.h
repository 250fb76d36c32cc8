// A host emulation of the CUDA execution model, just enough to run roofbench's kernels on a
// CPU for correctness (never for speed): one OS thread per CUDA thread, blocks one after
// another, __shared__ as static storage (one block at a time shares it), __syncthreads as a
// block barrier, warp shuffles and mma.sync through per-warp exchange buffers. The mma
// emulation reconstructs the A/B matrices from the lanes' fragment registers with the layouts
// of the PTX ISA ("Matrix fragments for mma.m16n8k16 / m16n8k32"), so it checks the kernel's
// fragment loads, tiling and epilogue against the documented layout.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <vector_types.h>

#define RB_HOST_EMU 1
#undef __global__
#undef __device__
#undef __shared__
#undef __forceinline__
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict

static thread_local uint3 threadIdx, blockIdx;
static thread_local dim3 blockDim, gridDim;

struct RbBlock {
    std::unique_ptr<std::barrier<>> block;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<uint64_t> xchg;  // 32 x (6 words) per warp: shuffles and mma fragments
};
static RbBlock* rb_blk = nullptr;
static thread_local int rb_lane = 0, rb_warp = 0;

inline void __syncthreads() { rb_blk->block->arrive_and_wait(); }
inline void rb_warp_sync() { rb_blk->warps[rb_warp]->arrive_and_wait(); }
inline uint64_t* rb_slot(int lane) { return &rb_blk->xchg[(rb_warp * 32 + lane) * 6]; }
[[noreturn]] inline void __trap() { std::abort(); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

template <typename T> T __shfl_xor_sync(unsigned, T v, int o) {
    static_assert(sizeof(T) <= 8, "");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    rb_slot(rb_lane)[0] = bits;
    rb_warp_sync();
    bits = rb_slot(rb_lane ^ o)[0];
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
    uint64_t* s = rb_slot(rb_lane);
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
    const int g = rb_lane >> 2, t = rb_lane & 3;
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

// Launch: blocks in order, one std::thread per CUDA thread. The kernel is called through a
// generic x86-64 SysV signature: integer-class arguments (pointers, long long) go to the
// integer registers in order and float arguments to xmm registers in order, whatever their
// interleaving in the real signature (at most 6 + 2 here).
typedef void (*rb_kernel_t)(long long, long long, long long, long long, long long, long long,
                            float, float);

extern "C" int rb_launch(void* fn, int gx, int gy, int gz, int bx, int by, int bz,
                         const long long* ia, const float* fa) {
    const int nthreads = bx * by * bz;
    const int nwarps = (nthreads + 31) / 32;
    if (nthreads % 32 != 0) return 1;  // the emulated warps need full warps
    rb_kernel_t k = reinterpret_cast<rb_kernel_t>(fn);
    for (int z = 0; z < gz; ++z)
        for (int y = 0; y < gy; ++y)
            for (int x = 0; x < gx; ++x) {
                RbBlock blk;
                blk.block = std::make_unique<std::barrier<>>(nthreads);
                for (int w = 0; w < nwarps; ++w)
                    blk.warps.push_back(std::make_unique<std::barrier<>>(32));
                blk.xchg.assign(nwarps * 32 * 6, 0);
                rb_blk = &blk;
                std::vector<std::thread> th;
                th.reserve(nthreads);
                for (int i = 0; i < nthreads; ++i)
                    th.emplace_back([=] {
                        threadIdx = make_uint3(i % bx, (i / bx) % by, i / (bx * by));
                        blockIdx = make_uint3(x, y, z);
                        blockDim = dim3(bx, by, bz);
                        gridDim = dim3(gx, gy, gz);
                        rb_lane = i % 32;
                        rb_warp = i / 32;
                        k(ia[0], ia[1], ia[2], ia[3], ia[4], ia[5], fa[0], fa[1]);
                    });
                for (auto& t : th) t.join();
                rb_blk = nullptr;
            }
    return 0;
}
