// CUDA-core FMA peak probes: FP64 DFMA, FP32 FFMA, FP16 HFMA2 and BF16 HFMA2.
// Each thread runs FMA_CHAINS independent chains y = y * a + b (a, b kernel arguments, so
// nothing is constant-folded) for `iters` x FMA_UNROLL steps, then writes the sum of its chains:
// every FMA feeds the store, so none is dead code. FLOPs per launch =
//   threads x iters x FMA_UNROLL x FMA_CHAINS x 2 (x 2 more for the packed half2 / bf162 forms).
// Header-free: half2/bfloat162 FMAs are PTX (fma.rn.f16x2 / fma.rn.bf16x2, sm_80+ for bf16).
// Under the CPU emulation (tests/standins/cuda_emu, RB_HOST_EMU) the packed instruction is
// executed and counted from its PTX name (tests/roofs/test_emu_probes.py counts the FLOPs).
#ifdef RB_HOST_EMU
#define PACKED_FMA(OP, y, a, b) y = rb_emu_fma_x2(OP, y, a, b)
#else
#define PACKED_FMA(OP, y, a, b) asm(OP " %0, %1, %2, %3;" : "=r"(y) : "r"(y), "r"(a), "r"(b))
#endif
#define FMA_CHAINS 8
#define FMA_UNROLL 64  // 512 FMAs per loop trip: the 3 loop instructions cost 0.6% of issue

__device__ __forceinline__ float fma_step(float y, float a, float b) { return fmaf(y, a, b); }
__device__ __forceinline__ double fma_step(double y, double a, double b) { return fma(y, a, b); }

template <typename T>
__device__ __forceinline__ void fma_chains(T a, T b, int iters, T* __restrict__ out) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    T y[FMA_CHAINS];
#pragma unroll
    for (int j = 0; j < FMA_CHAINS; ++j) y[j] = (T)(t + j) * (T)1e-7;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < FMA_UNROLL; ++u) {
#pragma unroll
            for (int j = 0; j < FMA_CHAINS; ++j) y[j] = fma_step(y[j], a, b);
        }
    }
    T s = T(0);
#pragma unroll
    for (int j = 0; j < FMA_CHAINS; ++j) s += y[j];
    out[t] = s;
}

extern "C" __global__ void fma_fp32(float a, float b, int iters, float* __restrict__ out) {
    fma_chains(a, b, iters, out);
}
extern "C" __global__ void fma_fp64(double a, double b, int iters, double* __restrict__ out) {
    fma_chains(a, b, iters, out);
}

// Packed 16-bit forms: a and b arrive as 32-bit words holding two halves (two bf16s).
// The chains are folded with XOR (an integer op on every arch; add.bf16x2 would need sm_90).
#define PACKED_FMA_KERNEL(NAME, PTXOP)                                                  \
extern "C" __global__ void NAME(unsigned int a, unsigned int b, int iters,                    \
                                unsigned int* __restrict__ out) {                              \
    const int t = blockIdx.x * blockDim.x + threadIdx.x;                                       \
    unsigned int y[FMA_CHAINS];                                                                \
    _Pragma("unroll") for (int j = 0; j < FMA_CHAINS; ++j) y[j] = b ^ (unsigned int)((t + j) & 0xff); \
    for (int i = 0; i < iters; ++i) {                                                          \
        _Pragma("unroll") for (int u = 0; u < FMA_UNROLL; ++u) {                               \
            _Pragma("unroll") for (int j = 0; j < FMA_CHAINS; ++j)                             \
                PACKED_FMA(PTXOP, y[j], a, b);                                                 \
        }                                                                                      \
    }                                                                                          \
    unsigned int s = y[0];                                                                     \
    _Pragma("unroll") for (int j = 1; j < FMA_CHAINS; ++j)                                     \
        s ^= y[j];                                                                             \
    out[t] = s;                                                                                \
}

PACKED_FMA_KERNEL(fma_fp16x2, "fma.rn.f16x2")
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
PACKED_FMA_KERNEL(fma_bf16x2, "fma.rn.bf16x2")
#endif
