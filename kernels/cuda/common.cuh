// Shared device helpers for roofbench's CUDA kernels (NVRTC- and nvcc-compatible: no host
// headers). Conventions every kernel follows, so the Python side can launch them blindly:
//   * kernels are `extern "C"` wrappers named <kernel>_<dtype> (fp64, fp32, fp16, bf16, fp8)
//     around templates, so CuPy (NVRTC) and PyCUDA (nvcc) look up the same plain names;
//   * integer scalars are `long long`, floating scalars are `float`;
//   * math is FP32 (FP64 for fp64) whatever the storage type: fp16/bf16/fp8 are storage formats.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

typedef long long i64;
typedef __nv_fp8_e4m3 fp8_t;

template <typename T> struct Acc { typedef float type; };
template <> struct Acc<double> { typedef double type; };

__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }
__device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_acc(fp8_t x) { return float(x); }

template <typename T> __device__ __forceinline__ T from_acc(typename Acc<T>::type x);
template <> __device__ __forceinline__ float from_acc<float>(float x) { return x; }
template <> __device__ __forceinline__ double from_acc<double>(double x) { return x; }
template <> __device__ __forceinline__ __half from_acc<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ fp8_t from_acc<fp8_t>(float x) { return fp8_t(x); }

__device__ __forceinline__ float acc_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double acc_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float acc_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ double acc_rsqrt(double x) { return rsqrt(x); }

// A 16-byte pack of storage values: one 128-bit load/store (LDG.E.128 / STG.E.128) carries
// 4 fp32, 8 fp16/bf16, 16 fp8 or 2 fp64. The union keeps the pack in registers.
template <typename T> struct Pack {
    static constexpr int N = 16 / sizeof(T);
    union {
        uint4 u;
        T v[N];
    };
    __device__ __forceinline__ Pack() {}
};

template <typename T> __device__ __forceinline__ Pack<T> ld_pack(const T* p) {
    Pack<T> r;
    r.u = *reinterpret_cast<const uint4*>(p);
    return r;
}
template <typename T> __device__ __forceinline__ void st_pack(T* p, const Pack<T>& r) {
    *reinterpret_cast<uint4*>(p) = r.u;
}

// Unpack a pack into accumulator values and back. fp8 goes through the paired hardware
// conversions (F2FP on sm_89+); the others convert element by element.
template <typename T>
__device__ __forceinline__ void unpack(const Pack<T>& p, typename Acc<T>::type (&f)[Pack<T>::N]) {
#pragma unroll
    for (int i = 0; i < Pack<T>::N; ++i) f[i] = to_acc(p.v[i]);
}
template <typename T>
__device__ __forceinline__ void pack(Pack<T>& p, const typename Acc<T>::type (&f)[Pack<T>::N]) {
#pragma unroll
    for (int i = 0; i < Pack<T>::N; ++i) p.v[i] = from_acc<T>(f[i]);
}
template <>
__device__ __forceinline__ void unpack<fp8_t>(const Pack<fp8_t>& p, float (&f)[16]) {
    const unsigned short* s = reinterpret_cast<const unsigned short*>(&p.u);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(s[i], __NV_E4M3);
        float2 f2 = __half22float2(*reinterpret_cast<__half2*>(&h));
        f[2 * i] = f2.x;
        f[2 * i + 1] = f2.y;
    }
}
template <>
__device__ __forceinline__ void pack<fp8_t>(Pack<fp8_t>& p, const float (&f)[16]) {
    unsigned short* s = reinterpret_cast<unsigned short*>(&p.u);
#pragma unroll
    for (int i = 0; i < 8; ++i)
        s[i] = __nv_cvt_float2_to_fp8x2(make_float2(f[2 * i], f[2 * i + 1]), __NV_SATFINITE,
                                        __NV_E4M3);
}

// Block-wide sum: warp shuffles, then one value per warp through shared memory.
// Every thread of the block must call it; all of them get the sum.
template <typename A> __device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <typename A> __device__ A block_sum(A v) {
    __shared__ A part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // part[] may still be read by a previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    const int nw = (blockDim.x + 31) >> 5;
    A t = lane < nw ? part[lane] : A(0);
    return warp_sum(t);
}

// Block-wide max, as block_sum: every thread of the block calls it and gets the max. ``lowest``
// fills the lanes past the last warp: a value no input is below (attention passes its finite
// floor for masked scores, so that no inf - inf follows).
// (The shuffles written out twice, not a warp_max helper: so attention's kernels compile to
// the SASS they had with their private copy, instruction for instruction.)
__device__ __forceinline__ float block_max(float v, float lowest) {
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();  // part[] may still be read by a previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    const int nw = (blockDim.x + 31) >> 5;
    float m = lane < nw ? part[lane] : lowest;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    return m;
}

// Elementwise ops and the vectorized grid-stride map shared by l2norm and rownorm.
struct OpSquare { template <typename A> __device__ A operator()(A x, A) const { return x * x; } };
struct OpAdd { template <typename A> __device__ A operator()(A x, A y) const { return x + y; } };
struct OpSqrt { template <typename A> __device__ A operator()(A x, A) const { return acc_sqrt(x); } };
struct OpL2 {
    template <typename A> __device__ A operator()(A x, A y) const { return acc_sqrt(x * x + y * y); }
};

// out[i] = op(x[i], y[i]) (y ignored when TWO is false: it is never read).
template <typename T, bool TWO, typename Op>
__device__ __forceinline__ void map(const T* __restrict__ x, const T* __restrict__ y,
                                    T* __restrict__ out, i64 n, Op op) {
    typedef typename Acc<T>::type A;
    constexpr int V = Pack<T>::N;
    const i64 npack = n / V;
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 p = tid; p < npack; p += stride) {
        A fx[V], fy[V];
        unpack(ld_pack(x + p * V), fx);
        if (TWO) unpack(ld_pack(y + p * V), fy);
#pragma unroll
        for (int i = 0; i < V; ++i) fx[i] = op(fx[i], TWO ? fy[i] : A(0));
        Pack<T> r;
        pack(r, fx);
        st_pack(out + p * V, r);
    }
    for (i64 i = npack * V + tid; i < n; i += stride)
        out[i] = from_acc<T>(op(to_acc(x[i]), TWO ? to_acc(y[i]) : A(0)));
}

#define RB_FOR_ALL_DTYPES(M)  \
    M(fp64, double)           \
    M(fp32, float)            \
    M(fp16, __half)           \
    M(bf16, __nv_bfloat16)    \
    M(fp8, fp8_t)
