// l2norm, elementwise: out = sqrt(a^2 + b^2).
//   naive = 4 launches with real intermediates in global memory:
//     l2_square(a -> t1), l2_square(b -> t2), l2_add(t1, t2 -> t3), l2_sqrt(t3 -> out)
//   fused = 1 launch: l2_fused(a, b -> out).
// Every kernel is the same vectorized grid-stride map (16-byte packs, scalar tail), so naive vs
// fused differs only in the bytes moved, which is what the fusion comparison is about.
#include "common.cuh"

#define RB_L2(SUF, T)                                                                   \
    extern "C" __global__ void l2_square_##SUF(const T* x, T* out, i64 n) {             \
        map<T, false>(x, x, out, n, OpSquare());                                        \
    }                                                                                   \
    extern "C" __global__ void l2_add_##SUF(const T* x, const T* y, T* out, i64 n) {    \
        map<T, true>(x, y, out, n, OpAdd());                                            \
    }                                                                                   \
    extern "C" __global__ void l2_sqrt_##SUF(const T* x, T* out, i64 n) {               \
        map<T, false>(x, x, out, n, OpSqrt());                                          \
    }                                                                                   \
    extern "C" __global__ void l2_fused_##SUF(const T* a, const T* b, T* out, i64 n) {  \
        map<T, true>(a, b, out, n, OpL2());                                             \
    }
RB_FOR_ALL_DTYPES(RB_L2)
