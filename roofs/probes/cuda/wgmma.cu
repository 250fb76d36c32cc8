// Tensor-core ceilings through Hopper's native path, wgmma.mma_async (sm_90a only), operands
// in shared memory as a GEMM mainloop reads them. Each warpgroup of the block multiplies one
// 64 x 128-byte A tile by one 256 x 128-byte B tile (both K-major, 128-byte swizzle, the
// layouts kernels/cuda/gemm_wgmma.cu uses), WGMMA_STEPS k steps per iteration into one
// m64n256 FP32 accumulator (128 registers per thread), `iters` iterations with one wgmma group
// in flight, then sums and stores its accumulators: no wgmma is dead.
// FLOPs per launch = blocks x (threads / 128) x iters x WGMMA_STEPS x 2 x 64 x 256 x K,
// K = 16 (fp16, bf16) or 32 (fp8 e4m3).
// The tiles are filled from `in` (random words the host made finite for every type), so the
// tensor cores multiply real data. Built for sm_90a through cuda-python
// (roofs/probes/cuda_driver.py). Other archs get a trapping stub.
#define WGMMA_STEPS 4          // k steps of 32 bytes per 128-byte row
#define WGMMA_TILE_A (64 * 128)
#define WGMMA_TILE_B (256 * 128)
#define WGMMA_SMEM (WGMMA_TILE_A + WGMMA_TILE_B + 1024)  // + slack to align to 1024 bytes
#define WGMMA_IN_WORDS ((WGMMA_TILE_A + WGMMA_TILE_B) / 4)

// The wgmma, fence and descriptor helpers: kernels/cuda/hopper_ops.cuh (shared with the
// GEMM; inlined by the host before NVRTC compiles, and replaced by the CPU emulation).
#include "hopper_ops.cuh"

#if defined(RB_HOPPER)

// Both tiles K-major, 128-byte swizzle: 8-row groups 1024 bytes apart (SBO), LBO unused.
#define WGMMA_PROBE(NAME, MMA)                                                                 \
extern "C" __global__ void __launch_bounds__(384, 1)                                          \
NAME(const unsigned int* __restrict__ in, int iters, float* __restrict__ out) {              \
    RB_STATIC_SMEM(unsigned char, raw, WGMMA_SMEM);                                            \
    const unsigned raw_s = smem_u32(raw);                                                      \
    unsigned char* sm = raw + ((1024 - (raw_s & 1023)) & 1023);                                \
    const unsigned base = smem_u32(sm);                                                        \
    unsigned int* w = reinterpret_cast<unsigned int*>(sm);                                     \
    for (int i = threadIdx.x; i < WGMMA_IN_WORDS; i += blockDim.x) w[i] = in[i];               \
    fence_proxy_async();                                                                       \
    __syncthreads();                                                                           \
    float d[128];                                                                              \
    _Pragma("unroll") for (int i = 0; i < 128; ++i) d[i] = 0.f;                                \
    for (int it = 0; it < iters; ++it) {                                                       \
        wgmma_fence();                                                                         \
        _Pragma("unroll") for (int k = 0; k < WGMMA_STEPS; ++k) {                              \
            const unsigned long long da = gmma_desc(base + 32 * k, 16, 1024);                  \
            const unsigned long long db = gmma_desc(base + WGMMA_TILE_A + 32 * k, 16, 1024);   \
            MMA(d, da, db);                                                                    \
        }                                                                                      \
        wgmma_commit();                                                                        \
        wgmma_wait<1>();                                                                       \
    }                                                                                          \
    wgmma_wait<0>();                                                                           \
    float s = 0.f;                                                                             \
    _Pragma("unroll") for (int i = 0; i < 128; ++i) s += d[i];                                 \
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;                                            \
}

#else

#define WGMMA_PROBE(NAME, MMA)                                                                 \
extern "C" __global__ void NAME(const unsigned int* __restrict__ in, int iters,               \
                                float* __restrict__ out) {                                     \
    __trap(); /* wgmma exists only in sm_90a: the host builds it for that target */            \
}

#endif

// m64n256k16, FP16 / BF16 inputs (both K-major: imm-trans-b = 0), FP32 accumulate.
WGMMA_PROBE(wgmma_fp16, wgmma_m64n256k16_f16<0>)
WGMMA_PROBE(wgmma_bf16, wgmma_m64n256k16_bf16<0>)
// m64n256k32, FP8 e4m3 inputs, FP32 accumulate (the native FP8 path cuBLASLt uses on Hopper).
WGMMA_PROBE(wgmma_fp8e4m3, wgmma_m64n256k32_e4m3)
