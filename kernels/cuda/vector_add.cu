// vector_add: c = a + b. 1 FLOP per element, 3 values moved.
//   vadd_scalar_<dt>: one element per thread per iteration, grid-stride.
//   vadd_vec4_<dt>:   one 16-byte pack per thread per iteration (float4 for fp32, 8 x half2 for
//                     fp16/bf16, 16 x fp8 e4m3 for fp8), grid-stride, scalar tail.
#include "common.cuh"

template <typename T>
__device__ __forceinline__ void vadd_scalar(const T* __restrict__ a, const T* __restrict__ b,
                                            T* __restrict__ c, i64 n) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        c[i] = from_acc<T>(to_acc(a[i]) + to_acc(b[i]));
}

// Pack-wise add: fp16/bf16 use paired half2 adds (HADD2); the others add in the accumulator
// type (fp8: FP32 math between hardware conversions).
template <typename T>
__device__ __forceinline__ Pack<T> add_pack(const Pack<T>& x, const Pack<T>& y) {
    typename Acc<T>::type fx[Pack<T>::N], fy[Pack<T>::N];
    unpack(x, fx);
    unpack(y, fy);
#pragma unroll
    for (int i = 0; i < Pack<T>::N; ++i) fx[i] += fy[i];
    Pack<T> r;
    pack(r, fx);
    return r;
}
// 8 fp16 / bf16 values as 4 paired adds (T2: the two-value type, HADD2).
template <typename T, typename T2>
__device__ __forceinline__ Pack<T> add_pack2(const Pack<T>& x, const Pack<T>& y) {
    Pack<T> r;
    const T2* x2 = reinterpret_cast<const T2*>(&x.u);
    const T2* y2 = reinterpret_cast<const T2*>(&y.u);
    T2* r2 = reinterpret_cast<T2*>(&r.u);
#pragma unroll
    for (int i = 0; i < 4; ++i) r2[i] = __hadd2(x2[i], y2[i]);
    return r;
}
template <>
__device__ __forceinline__ Pack<__half> add_pack<__half>(const Pack<__half>& x,
                                                         const Pack<__half>& y) {
    return add_pack2<__half, __half2>(x, y);
}
template <>
__device__ __forceinline__ Pack<__nv_bfloat16> add_pack<__nv_bfloat16>(
    const Pack<__nv_bfloat16>& x, const Pack<__nv_bfloat16>& y) {
    return add_pack2<__nv_bfloat16, __nv_bfloat162>(x, y);
}

// Buffers come from cudaMalloc (256-byte aligned), so packs are 16-byte aligned.
template <typename T>
__device__ __forceinline__ void vadd_vec4(const T* __restrict__ a, const T* __restrict__ b,
                                          T* __restrict__ c, i64 n) {
    constexpr int V = Pack<T>::N;
    const i64 npack = n / V;
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 p = tid; p < npack; p += stride)
        st_pack(c + p * V, add_pack(ld_pack(a + p * V), ld_pack(b + p * V)));
    for (i64 i = npack * V + tid; i < n; i += stride)  // tail: fewer than V elements
        c[i] = from_acc<T>(to_acc(a[i]) + to_acc(b[i]));
}

#define RB_VADD(SUF, T)                                                                  \
    extern "C" __global__ void vadd_scalar_##SUF(const T* a, const T* b, T* c, i64 n) {  \
        vadd_scalar<T>(a, b, c, n);                                                      \
    }                                                                                    \
    extern "C" __global__ void vadd_vec4_##SUF(const T* a, const T* b, T* c, i64 n) {    \
        vadd_vec4<T>(a, b, c, n);                                                        \
    }
RB_FOR_ALL_DTYPES(RB_VADD)
