// Empirical roofline (ERT / mixbench style): one kernel family whose FMAs per element are a
// compile-time constant K, so the compiler keeps exactly K dependent FMAs per element and
// cannot fold them. Each thread streams 16-byte vectors of `in` (far beyond L2), runs K FMAs
// y = y * x + c on every element and writes y to `out`:
//   bytes per element = 2 x sizeof(element) (read + write), FLOPs per element = 2 K,
//   so AI = K / sizeof(element): FP64 K/8, FP32 K/4, FP16/BF16 (packed pairs) K/2.
// Sweeping K = 0, 1, 2, 4 ... 1024 traces the roofline from the bandwidth roof across the ridge
// to the compute roof. `n` counts 32-bit words for the packed 16-bit forms (2 elements each),
// elements otherwise. Header-free inline PTX for the packed forms: NVRTC and nvcc alike.
// Kernels are extern "C" ert_<prec>_k<K>.

// Inner FMA loops unroll by 32 (literal below: pragmas do not expand macros).

template <int K> __device__ __forceinline__ float ert_f32(float x, float c) {
    float y = x;
#pragma unroll 32
    for (int k = 0; k < K; ++k) y = fmaf(y, x, c);
    return y;
}
template <int K> __device__ __forceinline__ double ert_f64(double x, double c) {
    double y = x;
#pragma unroll 32
    for (int k = 0; k < K; ++k) y = fma(y, x, c);
    return y;
}
template <int K> __device__ __forceinline__ unsigned int ert_h2(unsigned int x, unsigned int c) {
    unsigned int y = x;
#pragma unroll 32
    for (int k = 0; k < K; ++k) asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(y) : "r"(y), "r"(x), "r"(c));
    return y;
}
template <int K> __device__ __forceinline__ unsigned int ert_bf2(unsigned int x, unsigned int c) {
    unsigned int y = x;
#pragma unroll 32
    for (int k = 0; k < K; ++k) asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(y) : "r"(y), "r"(x), "r"(c));
    return y;
}

#define ERT_LOOP(T, V, VEC, F, BODY)                                                           \
    const long long nv = n / VEC;                                                              \
    const long long stride = (long long)gridDim.x * blockDim.x;                                \
    const V* iv = reinterpret_cast<const V*>(in); V* ov = reinterpret_cast<V*>(out);           \
    _Pragma("unroll 2")                                                                        \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += stride) { \
        V x = iv[i]; BODY; ov[i] = x;                                                          \
    }                                                                                          \
    for (long long i = nv * VEC + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;     \
         i += stride) out[i] = F(in[i], c);

#define ERT_4(F) x.x = F(x.x, c); x.y = F(x.y, c); x.z = F(x.z, c); x.w = F(x.w, c)
#define ERT_2(F) x.x = F(x.x, c); x.y = F(x.y, c)

#define ERT_KERNELS(K)                                                                         \
extern "C" __global__ void ert_fp32_k##K(const float* __restrict__ in, float* __restrict__ out, \
                                          long long n, float c) {                              \
    ERT_LOOP(float, float4, 4, ert_f32<K>, ERT_4(ert_f32<K>))                                  \
}                                                                                              \
extern "C" __global__ void ert_fp64_k##K(const double* __restrict__ in,                       \
                                          double* __restrict__ out, long long n, double c) {   \
    ERT_LOOP(double, double2, 2, ert_f64<K>, ERT_2(ert_f64<K>))                                \
}                                                                                              \
extern "C" __global__ void ert_fp16x2_k##K(const unsigned int* __restrict__ in,               \
                                            unsigned int* __restrict__ out, long long n,        \
                                            unsigned int c) {                                  \
    ERT_LOOP(unsigned int, uint4, 4, ert_h2<K>, ERT_4(ert_h2<K>))                              \
}                                                                                              \
ERT_BF16(K)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define ERT_BF16(K)                                                                            \
extern "C" __global__ void ert_bf16x2_k##K(const unsigned int* __restrict__ in,               \
                                            unsigned int* __restrict__ out, long long n,        \
                                            unsigned int c) {                                  \
    ERT_LOOP(unsigned int, uint4, 4, ert_bf2<K>, ERT_4(ert_bf2<K>))                            \
}
#else
#define ERT_BF16(K)
#endif

// The K ladder; keep in sync with ERT_FMAS in gpu_probes.py.
ERT_KERNELS(0)
ERT_KERNELS(1)
ERT_KERNELS(2)
ERT_KERNELS(4)
ERT_KERNELS(8)
ERT_KERNELS(16)
ERT_KERNELS(32)
ERT_KERNELS(64)
ERT_KERNELS(128)
ERT_KERNELS(256)
ERT_KERNELS(512)
ERT_KERNELS(1024)
