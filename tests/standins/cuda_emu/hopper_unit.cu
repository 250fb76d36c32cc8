// Small kernels that drive the emulated Hopper primitives one at a time
// (tests/kernels/test_cuda_emu.py). They include kernels/cuda/hopper_ops.cuh as the real kernels do,
// and run only under the emulation (it defines RB_HOPPER).
#include "common.cuh"
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
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        mbar_init_fence();
    }
    __syncthreads();
    mbar_wait(b, parity, "unit", 7);
    out[threadIdx.x] = 1;
}

// A __syncthreads that the first warp never reaches (it returned first): on the GPU a hang,
// in the emulation a failed launch naming the threads that wait.
extern "C" __global__ void unit_deadlock(int* out) {
    if (threadIdx.x < 32) return;
    __syncthreads();
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
// out[6]: the first shared byte of the box once the wait saw the phase complete. With `peek`,
// a plain load of the box right after the TMA, before any wait (the emulation refuses it).
extern "C" __global__ void unit_phase(const __grid_constant__ TmaDesc map, int expect, int peek,
                                      int* out) {
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
        if (peek) out[7] = sm[0];      // a plain load that did not wait for the phase
        mbar_arrive(b);
        out[4] = mbar_try_wait(b, 0);  // both counts zero: the phase of parity 0 completed
        out[5] = mbar_try_wait(b, 1);  // the next phase has not
        if (out[4]) out[6] = sm[0];
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
//   2: a plain store over the barrier object;
//   3: a thread uses the barrier after a __syncthreads, but no fence.mbarrier_init followed
//      the init.
extern "C" __global__ void unit_mbar_misuse(int mode, int* out) {
    RB_STATIC_SMEM(unsigned long long, bar, 1);
    const unsigned b = smem_u32(bar);
    if (mode == 1) {
        if (threadIdx.x == 0) mbar_init(b, 1);
        if (threadIdx.x == 32) mbar_arrive(b);
        out[threadIdx.x] = 1;
        return;
    }
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        if (mode != 3) mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x == 32 && mode == 3) mbar_arrive(b);
    if (threadIdx.x == 0) {
        if (mode == 0) {
            mbar_expect_tx(b, 16);
            mbar_arrive(b);
        } else if (mode == 2) {
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
    if (t == 0) {
        mbar_init(b, 1);
        mbar_init_fence();
    }
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

// Shared memory is poisoned for every block and every launch: each thread reads its word of a
// __shared__ array before anything wrote it (out[block * 64 + t]), then writes it.
extern "C" __global__ void unit_poison(unsigned* out) {
    __shared__ unsigned s[64];
    const int t = threadIdx.x;
    out[blockIdx.x * 64 + t] = s[t];
    s[t] = 0x12345678u + blockIdx.x;
}

// Two blocks in flight: block b (of 2) raises flags[b] and waits (bounded) for the other's
// flag, which only a block running at the same time can raise; out[b] = 1 when it came.
extern "C" __global__ void unit_two_blocks(int* flags, int* out) {
    if (threadIdx.x != 0) return;
    volatile int* f = flags;
    const int b = blockIdx.x;
    f[b] = 1;
    const long long t0 = clock64();
    while (f[1 - b] == 0 && clock64() - t0 < 2000000000ll) {
    }
    out[b] = f[1 - b];
}

// Plain shared-memory accesses between threads, `mode`:
//   0: each thread stores s[t], __syncthreads, loads s[t + 1]: ordered;
//   1: the same without the __syncthreads: a race whatever the schedule;
//   2: every thread loads s[0], then thread 1 stores it with no barrier between: a race;
//   3: as 2 with a __syncthreads between: ordered.
extern "C" __global__ void unit_race(int mode, int* out) {
    __shared__ int s[128];
    const int t = threadIdx.x;
    int v = 0;
    if (mode <= 1) {
        s[t] = t;
        if (mode == 0) __syncthreads();
        v = s[(t + 1) % blockDim.x];
    } else {
        if (t == 0) s[0] = 7;
        __syncthreads();
        v = s[0];
        if (mode == 3) __syncthreads();
        if (t == 1) s[0] = 8;
    }
    out[t] = v;
}

// Shuffles within two half warps (lanes 0-15 with mask 0x0000ffff, 16-31 with 0xffff0000, a
// legal split): out[t] = the value of lane t ^ o, NaN (floats) / 0xA5A5A5A5 (ints) when that
// lane is outside the caller's mask (o = 16).
extern "C" __global__ void unit_shfl(int o, float* out, unsigned* iout) {
    const int t = threadIdx.x, lane = t & 31;
    const unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
    out[t] = __shfl_xor_sync(mask, (float)t, o);
    iout[t] = __shfl_xor_sync(mask, (unsigned)t, o);
}

// common.cuh's block-wide reduction called twice in one kernel, fp32 then fp64, as a kernel
// reducing twice would: the second call's stores into its part[] must be ordered after the
// first call's loads of it (block_sum's leading __syncthreads). out[3t..3t+2] = the sum of
// the thread indices, the thread count, the thread count again (fp64).
extern "C" __global__ void unit_block_sum_twice(float* out) {
    const float a = block_sum((float)threadIdx.x);
    const float b = block_sum(1.0f);
    const double c = block_sum(1.0);
    out[3 * threadIdx.x] = a;
    out[3 * threadIdx.x + 1] = b;
    out[3 * threadIdx.x + 2] = (float)c;
}
