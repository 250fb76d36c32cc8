// rownorm: y = x / sqrt(sum(x^2) + eps) per row of x[batch, hidden]; row sums and scales are
// kept in the accumulator type (fp32, fp64 for fp64).
//   naive   = rn_square (x -> sq), rn_rowsum (sq -> sums), rn_rsqrt (sums -> scale),
//             rn_scale (x, scale -> y): 4 launches through global memory.
//   fused   = rn_fused: one block per row, warp-shuffle + shared-memory reduction, then x is
//             read a second time to scale (the book's fusedL2Norm).
//   onepass = rn_onepass: one block per row, the row held in registers between the reduction
//             and the scale, so x is read once. Capacity: blockDim (<= 1024) x RN_PACKS 16-byte
//             packs when hidden is a multiple of the pack, else blockDim x RN_ELEMS values;
//             the host refuses larger rows (kernels/cuda_impl.py: onepass_capacity).
// Rows are 16-byte aligned iff hidden is a multiple of the pack, so the row-wise kernels pick
// the vector path at run time (uniform branch) and fall back to scalar loads otherwise.
#include "common.cuh"

#define RN_PACKS 8
#define RN_ELEMS 16

// This thread's share of a row's sum of squares (SQ) or plain sum (the naive pipeline's
// row-reduce of already-squared values).
template <bool SQ, typename T>
__device__ __forceinline__ typename Acc<T>::type row_reduce(const T* __restrict__ xr, i64 h) {
    typedef typename Acc<T>::type A;
    constexpr int V = Pack<T>::N;
    A s = 0;
    if (h % V == 0) {
        for (i64 p = threadIdx.x; p < h / V; p += blockDim.x) {
            A f[V];
            unpack(ld_pack(xr + p * V), f);
#pragma unroll
            for (int i = 0; i < V; ++i) s += SQ ? f[i] * f[i] : f[i];
        }
    } else {
        for (i64 j = threadIdx.x; j < h; j += blockDim.x) {
            const A v = to_acc(xr[j]);
            s += SQ ? v * v : v;
        }
    }
    return s;
}

template <typename T>
__device__ __forceinline__ void row_scale(const T* __restrict__ xr, T* __restrict__ yr, i64 h,
                                          typename Acc<T>::type sc) {
    typedef typename Acc<T>::type A;
    constexpr int V = Pack<T>::N;
    if (h % V == 0) {
        for (i64 p = threadIdx.x; p < h / V; p += blockDim.x) {
            A f[V];
            unpack(ld_pack(xr + p * V), f);
#pragma unroll
            for (int i = 0; i < V; ++i) f[i] *= sc;
            Pack<T> o;
            pack(o, f);
            st_pack(yr + p * V, o);
        }
    } else {
        for (i64 j = threadIdx.x; j < h; j += blockDim.x) yr[j] = from_acc<T>(to_acc(xr[j]) * sc);
    }
}

template <typename T>
__device__ __forceinline__ void rn_onepass(const T* __restrict__ x, T* __restrict__ y, i64 h,
                                           float eps) {
    typedef typename Acc<T>::type A;
    constexpr int V = Pack<T>::N;
    const T* xr = x + (i64)blockIdx.x * h;
    T* yr = y + (i64)blockIdx.x * h;
    const int nt = blockDim.x;
    A s = 0;
    if (h % V == 0) {
        const int nvec = (int)(h / V);
        Pack<T> r[RN_PACKS];  // fully unrolled, constant indices: stays in registers
#pragma unroll
        for (int k = 0; k < RN_PACKS; ++k) {
            const int p = threadIdx.x + k * nt;
            if (p < nvec) {
                r[k] = ld_pack(xr + (i64)p * V);
                A f[V];
                unpack(r[k], f);
#pragma unroll
                for (int i = 0; i < V; ++i) s += f[i] * f[i];
            }
        }
        const A sc = acc_rsqrt(block_sum(s) + A(eps));
#pragma unroll
        for (int k = 0; k < RN_PACKS; ++k) {
            const int p = threadIdx.x + k * nt;
            if (p < nvec) {
                A f[V];
                unpack(r[k], f);
#pragma unroll
                for (int i = 0; i < V; ++i) f[i] *= sc;
                Pack<T> o;
                pack(o, f);
                st_pack(yr + (i64)p * V, o);
            }
        }
    } else {
        const int n = (int)h;
        T r[RN_ELEMS];
#pragma unroll
        for (int k = 0; k < RN_ELEMS; ++k) {
            const int j = threadIdx.x + k * nt;
            if (j < n) {
                r[k] = xr[j];
                const A v = to_acc(r[k]);
                s += v * v;
            }
        }
        const A sc = acc_rsqrt(block_sum(s) + A(eps));
#pragma unroll
        for (int k = 0; k < RN_ELEMS; ++k) {
            const int j = threadIdx.x + k * nt;
            if (j < n) yr[j] = from_acc<T>(to_acc(r[k]) * sc);
        }
    }
}

#define RB_RN(SUF, T)                                                                        \
    typedef Acc<T>::type acc_##SUF;                                                          \
    extern "C" __global__ void rn_square_##SUF(const T* x, T* sq, i64 b, i64 h) {            \
        map<T, false>(x, x, sq, b * h, OpSquare());                                          \
    }                                                                                        \
    extern "C" __global__ void rn_rowsum_##SUF(const T* sq, acc_##SUF* sums, i64 b, i64 h) { \
        const acc_##SUF s = block_sum(row_reduce<false>(sq + (i64)blockIdx.x * h, h));       \
        if (threadIdx.x == 0) sums[blockIdx.x] = s;                                          \
    }                                                                                        \
    extern "C" __global__ void rn_rsqrt_##SUF(const acc_##SUF* sums, acc_##SUF* scale, i64 b, \
                                              float eps) {                                   \
        const i64 stride = (i64)gridDim.x * blockDim.x;                                      \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < b; i += stride)         \
            scale[i] = acc_rsqrt(sums[i] + acc_##SUF(eps));                                  \
    }                                                                                        \
    extern "C" __global__ void rn_scale_##SUF(const T* x, const acc_##SUF* scale, T* y, i64 b, \
                                              i64 h) {                                       \
        const i64 off = (i64)blockIdx.x * h;                                                 \
        row_scale(x + off, y + off, h, scale[blockIdx.x]);                                   \
    }                                                                                        \
    extern "C" __global__ void rn_fused_##SUF(const T* x, T* y, i64 b, i64 h, float eps) {   \
        const i64 off = (i64)blockIdx.x * h;                                                 \
        const acc_##SUF s = block_sum(row_reduce<true>(x + off, h));                         \
        row_scale(x + off, y + off, h, acc_rsqrt(s + acc_##SUF(eps)));                       \
    }                                                                                        \
    extern "C" __global__ void __launch_bounds__(1024)                                       \
        rn_onepass_##SUF(const T* x, T* y, i64 b, i64 h, float eps) {                        \
        rn_onepass<T>(x, y, h, eps);                                                         \
    }
RB_FOR_ALL_DTYPES(RB_RN)
