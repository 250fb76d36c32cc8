// STREAM-style HBM bandwidth probes: copy, scale, add, triad, read-only (reduction) and
// write-only (fill), FP32 (float4) and FP64 (double2), vectorized grid-stride loops.
// Header-free so NVRTC (CuPy RawModule) and nvcc compile it alike. Every kernel takes the
// element count n; the vector body covers n / VEC elements and a scalar tail the rest, so any n
// is correct. Bytes moved per launch (reads + writes, STREAM's convention):
//   copy 2n, scale 2n, add 3n, triad 3n, read n, fill n  (x sizeof(T)).

// STREAM_ILP independent 16-byte accesses per array per thread in flight: each trip of the
// grid-stride loop issues all its loads before any store (a plain unrolled loop interleaves
// them, since stores may alias), so a thread keeps STREAM_ILP x (arrays read) loads in flight
// (Little's law: ~20 KB per SM are needed for an H200's 4.8 TB/s at ~600 ns latency).
#define STREAM_ILP 4

// for every vector index i < nv of this thread: st(i, ld(i)), loads batched STREAM_ILP deep.
template <typename Ld, typename St>
__device__ __forceinline__ void ilp_loop(long long nv, Ld ld, St st) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (STREAM_ILP - 1) * stride < nv; i += STREAM_ILP * stride) {
        decltype(ld(i)) x[STREAM_ILP];
#pragma unroll
        for (int u = 0; u < STREAM_ILP; ++u) x[u] = ld(i + u * stride);
        asm volatile("" ::: "memory");  // keep every load of the trip ahead of its stores
#pragma unroll
        for (int u = 0; u < STREAM_ILP; ++u) st(i + u * stride, x[u]);
    }
    for (; i < nv; i += stride) st(i, ld(i));
}
template <typename V> struct Two { V x, y; };  // (the V* macros take arguments named x, y)

#define STREAM_KERNELS(SUF, T, V, VEC)                                                         \
extern "C" __global__ void stream_copy_##SUF(const T* __restrict__ a, T* __restrict__ c,      \
                                             long long n) {                                    \
    const long long nv = n / VEC;                                                              \
    const V* av = reinterpret_cast<const V*>(a); V* cv = reinterpret_cast<V*>(c);              \
    ilp_loop(nv, [&](long long i) { return av[i]; }, [&](long long i, V x) { cv[i] = x; });    \
    for (long long i = nv * VEC + blockIdx.x * blockDim.x + threadIdx.x; i < n;                \
         i += (long long)gridDim.x * blockDim.x) c[i] = a[i];                                  \
}                                                                                              \
extern "C" __global__ void stream_scale_##SUF(const T* __restrict__ c, T* __restrict__ b,     \
                                              T s, long long n) {                              \
    const long long nv = n / VEC;                                                              \
    const V* cv = reinterpret_cast<const V*>(c); V* bv = reinterpret_cast<V*>(b);              \
    ilp_loop(nv, [&](long long i) { return cv[i]; },                                           \
             [&](long long i, V x) { bv[i] = VSCALE(s, x); });                                 \
    for (long long i = nv * VEC + blockIdx.x * blockDim.x + threadIdx.x; i < n;                \
         i += (long long)gridDim.x * blockDim.x) b[i] = s * c[i];                              \
}                                                                                              \
extern "C" __global__ void stream_add_##SUF(const T* __restrict__ a, const T* __restrict__ b, \
                                            T* __restrict__ c, long long n) {                  \
    const long long nv = n / VEC;                                                              \
    const V* av = reinterpret_cast<const V*>(a); const V* bv = reinterpret_cast<const V*>(b);  \
    V* cv = reinterpret_cast<V*>(c);                                                           \
    ilp_loop(nv, [&](long long i) { return Two<V>{av[i], bv[i]}; },                            \
             [&](long long i, Two<V> p) { V x = p.x, y = p.y; cv[i] = VADD(x, y); });         \
    for (long long i = nv * VEC + blockIdx.x * blockDim.x + threadIdx.x; i < n;                \
         i += (long long)gridDim.x * blockDim.x) c[i] = a[i] + b[i];                           \
}                                                                                              \
extern "C" __global__ void stream_triad_##SUF(T* __restrict__ a, const T* __restrict__ b,     \
                                              const T* __restrict__ c, T s, long long n) {     \
    const long long nv = n / VEC;                                                              \
    V* av = reinterpret_cast<V*>(a); const V* bv = reinterpret_cast<const V*>(b);              \
    const V* cv = reinterpret_cast<const V*>(c);                                               \
    ilp_loop(nv, [&](long long i) { return Two<V>{bv[i], cv[i]}; },                            \
             [&](long long i, Two<V> p) { V x = p.x, y = p.y; av[i] = VTRIAD(x, s, y); });     \
    for (long long i = nv * VEC + blockIdx.x * blockDim.x + threadIdx.x; i < n;                \
         i += (long long)gridDim.x * blockDim.x) a[i] = b[i] + s * c[i];                       \
}                                                                                              \
/* Read-only: a sum reduction. One atomic per warp keeps the result live (no dead code) */    \
/* at a cost of n / (32 * elements per thread) atomics: negligible against n reads. */        \
extern "C" __global__ void stream_read_##SUF(const T* __restrict__ a, T* __restrict__ out,    \
                                             long long n) {                                    \
    const long long nv = n / VEC;                                                              \
    const V* av = reinterpret_cast<const V*>(a);                                               \
    T acc = 0;                                                                                 \
    ilp_loop(nv, [&](long long i) { return av[i]; }, [&](long long, V x) { acc += VSUM(x); }); \
    for (long long i = nv * VEC + blockIdx.x * blockDim.x + threadIdx.x; i < n;                \
         i += (long long)gridDim.x * blockDim.x) acc += a[i];                                  \
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);             \
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);                                          \
}                                                                                              \
extern "C" __global__ void stream_fill_##SUF(T* __restrict__ a, T v, long long n) {           \
    const long long nv = n / VEC;                                                              \
    V* av = reinterpret_cast<V*>(a);                                                           \
    const V x = VSPLAT(v);                                                                     \
    ilp_loop(nv, [&](long long) { return x; }, [&](long long i, V y) { av[i] = y; });          \
    for (long long i = nv * VEC + blockIdx.x * blockDim.x + threadIdx.x; i < n;                \
         i += (long long)gridDim.x * blockDim.x) a[i] = v;                                     \
}

// float4: 4 lanes
#define VSCALE(s, x) make_float4((s) * (x).x, (s) * (x).y, (s) * (x).z, (s) * (x).w)
#define VADD(x, y) make_float4((x).x + (y).x, (x).y + (y).y, (x).z + (y).z, (x).w + (y).w)
#define VTRIAD(x, s, y) make_float4((x).x + (s) * (y).x, (x).y + (s) * (y).y, \
                                    (x).z + (s) * (y).z, (x).w + (s) * (y).w)
#define VSUM(x) (((x).x + (x).y) + ((x).z + (x).w))
#define VSPLAT(v) make_float4((v), (v), (v), (v))
STREAM_KERNELS(f32, float, float4, 4)
#undef VSCALE
#undef VADD
#undef VTRIAD
#undef VSUM
#undef VSPLAT

// double2: 2 lanes (16-byte accesses like float4)
#define VSCALE(s, x) make_double2((s) * (x).x, (s) * (x).y)
#define VADD(x, y) make_double2((x).x + (y).x, (x).y + (y).y)
#define VTRIAD(x, s, y) make_double2((x).x + (s) * (y).x, (x).y + (s) * (y).y)
#define VSUM(x) ((x).x + (x).y)
#define VSPLAT(v) make_double2((v), (v))
STREAM_KERNELS(f64, double, double2, 2)
