// Small kernels that drive the emulated Hopper primitives one at a time
// (tests/kernels/test_cuda_emu.py). They include kernels/cuda/hopper_ops.cuh as the real kernels do,
// and run only under the emulation (it defines RB_HOPPER).
#include "hopper_ops.cuh"

struct __align__(64) TmaDesc { unsigned long long v[16]; };

// The first 1024-aligned byte of the dynamic shared memory.
__device__ __forceinline__ unsigned char* aligned_smem(unsigned char* raw) {
    return raw + ((1024 - (smem_u32(raw) & 1023)) & 1023);
}

// Wait for the phase of `parity` of a fresh count-1 barrier that nobody arrives on: parity 1
// passes at once, parity 0 never completes (the bounded wait traps, naming unit[7]).
extern "C" __global__ void unit_wait(int parity, int* out) {
    RB_STATIC_SMEM(unsigned long long, bar, 1);
    const unsigned b = smem_u32(bar);
    if (threadIdx.x == 0) mbar_init(b, 1);
    __syncthreads();
    mbar_wait(b, parity, "unit", 7);
    out[threadIdx.x] = 1;
}

// The dynamic shared memory, 1024-aligned, as `sm`, and one mbarrier at shared address `b`.
#define UNIT_SMEM_AND_BAR(sm, b)                                                             \
    RB_DYNAMIC_SMEM(raw);                                                                    \
    unsigned char* sm = aligned_smem(raw);                                                   \
    RB_STATIC_SMEM(unsigned long long, bar, 1);                                              \
    const unsigned b = smem_u32(bar)

// One phase of a count-2 barrier, step by step in thread 0: out[0..5] = try_wait results
// after each step (expect_tx of `expect` bytes, the TMA of the map's box, the second arrive);
// out[6], out[7]: the first shared byte of the box before and after the phase completes.
extern "C" __global__ void unit_phase(const __grid_constant__ TmaDesc map, int expect, int* out) {
    UNIT_SMEM_AND_BAR(sm, b);
    if (threadIdx.x == 0) {
        mbar_init(b, 2);
        mbar_init_fence();
        out[0] = mbar_try_wait(b, 1);  // a fresh barrier: the "previous" phase has completed
        out[1] = mbar_try_wait(b, 0);
        mbar_expect_tx(b, (unsigned)expect);
        out[2] = mbar_try_wait(b, 0);  // one arrival and the bytes outstanding
        tma_load_2d(smem_u32(sm), &map, 0, 0, b);
        out[3] = mbar_try_wait(b, 0);  // bytes in (if expect matched), one arrival pending
        out[6] = sm[0];                // a plain load that did not wait for the phase
        mbar_arrive(b);
        out[7] = sm[0];
        out[4] = mbar_try_wait(b, 0);  // both counts zero: the phase of parity 0 completed
        out[5] = mbar_try_wait(b, 1);  // the next phase has not
    }
}

// TMA of the box at (c0, c1) into 1024-aligned shared memory; every thread waits, then the
// block copies `bytes` of what landed to `out`.
extern "C" __global__ void unit_tma(const __grid_constant__ TmaDesc map, int c0, int c1,
                                    int bytes, unsigned char* out) {
    UNIT_SMEM_AND_BAR(sm, b);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_expect_tx(b, (unsigned)bytes);
        tma_load_2d(smem_u32(sm), &map, c0, c1, b);
    }
    mbar_wait(b, 0, "tma", 0);
    for (int i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = sm[i];
}

// Misuses of the mbarrier that the emulation must refuse.
//   0: an arrival more than the count while transaction bytes are outstanding;
//   1: a thread uses the barrier without synchronizing with its init;
//   2: a plain store over the barrier object.
extern "C" __global__ void unit_mbar_misuse(int mode, int* out) {
    RB_STATIC_SMEM(unsigned long long, bar, 1);
    const unsigned b = smem_u32(bar);
    if (mode == 1) {
        if (threadIdx.x == 0) mbar_init(b, 1);
        if (threadIdx.x == 32) mbar_arrive(b);
        out[threadIdx.x] = 1;
        return;
    }
    if (threadIdx.x == 0) mbar_init(b, 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        if (mode == 0) {
            mbar_expect_tx(b, 16);
            mbar_arrive(b);
        } else {
            bar[0] = 0;
            mbar_arrive(b);
        }
    }
    out[threadIdx.x] = 1;
}

// One warpgroup, one wgmma m64n256k16 fp16 from tiles filled with 1.0 (A K-major, B K-major,
// 128-byte swizzle):
//   0: correct: fence, mma, commit, wait 0 -> out[t] = d[0] (16);
//   1: the accumulator read before wait_group -> out[t] = d[0] then, after the wait, out[128+t];
//   2: mma without a fence; 3: the thread ends with the group pending;
//   4: a plain store over an operand before the wait_group;
//   5: TMA over the A tile while the group still reads it (`map`: a box of 64 x 64 fp16).
extern "C" __global__ void unit_wgmma(const __grid_constant__ TmaDesc map, int mode,
                                      float* out) {
    RB_DYNAMIC_SMEM(raw);
    unsigned char* sm = aligned_smem(raw);
    RB_STATIC_SMEM(unsigned long long, bar, 1);
    const unsigned base = smem_u32(sm), b = smem_u32(bar);
    const int t = threadIdx.x;
    unsigned short* h = reinterpret_cast<unsigned short*>(sm);
    for (int i = t; i < (64 + 256) * 64; i += blockDim.x) h[i] = 0x3C00;  // 1.0
    if (t == 0) mbar_init(b, 1);
    fence_proxy_async();
    __syncthreads();
    float d[128];
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    const unsigned long long da = gmma_desc(base, 16, 1024);
    const unsigned long long db = gmma_desc(base + 64 * 128, 16, 1024);
    if (mode != 2) wgmma_fence();
    wgmma_m64n256k16_f16<0>(d, da, db);
    wgmma_commit();
    if (mode == 1) out[t] = d[0];
    if (mode == 3) return;
    if (mode == 4 && t == 0) h[5] = 0x4000;
    if (mode == 5 && t == 0) {
        mbar_expect_tx(b, 64 * 128);
        tma_load_2d(base, &map, 0, 0, b);
    }
    wgmma_wait<0>();
    out[mode == 1 ? 128 + t : t] = d[0];
}
