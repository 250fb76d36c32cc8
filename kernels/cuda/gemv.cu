// gemv (decode): y[M] = W[M][K] x[K], W row-major in the case dtype, x and y in the activation
// dtype (the case dtype; fp16 when W is fp8 e4m3), FP32 accumulation (FP64 for fp64).
//   gemv_warp_<dt>: one warp per row, grid-stride over rows (any grid is correct, so the
//   resident blocks can be limited by the grid or by dynamic shared memory without changing
//   the result); each lane reads 16-byte packs of the row (4 fp32, 8 fp16/bf16, 16 fp8, 2 fp64)
//   and the matching x values, then the warp sums its lanes' partial dot products by shuffles.
//   Rows whose length is not a multiple of the pack fall back to scalar loads (rows are then
//   not 16-byte aligned).
#include "common.cuh"

template <typename TW, typename TX>
__device__ __forceinline__ void gemv_warp(const TW* __restrict__ W, const TX* __restrict__ x,
                                          TX* __restrict__ y, i64 M, i64 K) {
    typedef typename Acc<TW>::type A;
    constexpr int VW = Pack<TW>::N;          // W values per 16-byte pack
    constexpr int VX = Pack<TX>::N;          // x values per 16-byte pack
    constexpr int NX = VW / VX;              // x packs per W pack (2 for fp8 W, fp16 x)
    const int lane = threadIdx.x & 31;
    const i64 warps = (i64)gridDim.x * (blockDim.x >> 5);
    const bool vec = K % VW == 0;
    for (i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); row < M;
         row += warps) {  // uniform per warp: every lane reaches the shuffles below
        const TW* wr = W + row * K;
        A acc = 0;
        if (vec) {
            for (i64 p = lane; p < K / VW; p += 32) {
                A fw[VW];
                unpack(ld_pack(wr + p * VW), fw);
#pragma unroll
                for (int q = 0; q < NX; ++q) {
                    typename Acc<TX>::type fx[VX];
                    unpack(ld_pack(x + p * VW + q * VX), fx);
#pragma unroll
                    for (int i = 0; i < VX; ++i) acc += fw[q * VX + i] * A(fx[i]);
                }
            }
        } else {
            for (i64 j = lane; j < K; j += 32) acc += to_acc(wr[j]) * A(to_acc(x[j]));
        }
        acc = warp_sum(acc);
        if (lane == 0) y[row] = from_acc<TX>(acc);
    }
}

#define RB_GEMV(SUF, TW, TX)                                                                \
    extern "C" __global__ void gemv_warp_##SUF(const TW* W, const TX* x, TX* y, i64 M,      \
                                               i64 K) {                                     \
        gemv_warp<TW, TX>(W, x, y, M, K);                                                   \
    }
RB_GEMV(fp64, double, double)
RB_GEMV(fp32, float, float)
RB_GEMV(fp16, __half, __half)
RB_GEMV(bf16, __nv_bfloat16, __nv_bfloat16)
RB_GEMV(fp8, fp8_t, __half)
