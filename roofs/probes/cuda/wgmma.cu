// Tensor-core ceilings through Hopper's native path, wgmma.mma_async (sm_90a only), operands
// in shared memory as a GEMM mainloop reads them. Each warpgroup of the block multiplies one
// 64 x 128-byte A tile by one 256 x 128-byte B tile (both K-major, 128-byte swizzle, the
// layouts kernels/cuda/gemm_wgmma.cu uses), WGMMA_STEPS k steps per iteration into one
// m64n256 FP32 accumulator (128 registers per thread), `iters` iterations with one wgmma group
// in flight, then sums and stores its accumulators: no wgmma is dead.
// FLOPs per launch = blocks x (threads / 128) x iters x WGMMA_STEPS x 2 x 64 x 256 x K,
// K = 16 (fp16, bf16) or 32 (fp8 e4m3).
// The tiles are filled from `in` (random words the host made finite for every type), so the
// tensor cores multiply real data. Header-free inline PTX (NVRTC with no include path); built
// for sm_90a through cuda-python (roofs/cuda_driver.py). Other archs get a trapping stub.
#define WGMMA_STEPS 4          // k steps of 32 bytes per 128-byte row
#define WGMMA_TILE_A (64 * 128)
#define WGMMA_TILE_B (256 * 128)
#define WGMMA_SMEM (WGMMA_TILE_A + WGMMA_TILE_B + 1024)  // + slack to align to 1024 bytes
#define WGMMA_IN_WORDS ((WGMMA_TILE_A + WGMMA_TILE_B) / 4)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

#define WGMMA_D_OPERANDS                                                                     \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "       \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "       \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "       \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "       \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "       \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, " \
    "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, "   \
    "%125, %126, %127}"
#define WGMMA_D8(i)                                                                          \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),              \
        "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WGMMA_D128                                                                           \
    WGMMA_D8(0), WGMMA_D8(8), WGMMA_D8(16), WGMMA_D8(24), WGMMA_D8(32), WGMMA_D8(40),        \
        WGMMA_D8(48), WGMMA_D8(56), WGMMA_D8(64), WGMMA_D8(72), WGMMA_D8(80), WGMMA_D8(88),   \
        WGMMA_D8(96), WGMMA_D8(104), WGMMA_D8(112), WGMMA_D8(120)

// K-major, 128-byte swizzle: 8-row groups 1024 bytes apart (SBO), LBO unused.
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) |
           ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

#define WGMMA_PROBE(NAME, SHAPE_TYPES, EXTRA)                                                  \
extern "C" __global__ void __launch_bounds__(384, 1)                                          \
NAME(const unsigned int* __restrict__ in, int iters, float* __restrict__ out) {              \
    __shared__ unsigned char raw[WGMMA_SMEM];                                                  \
    const unsigned raw_s = (unsigned)__cvta_generic_to_shared(raw);                            \
    unsigned char* sm = raw + ((1024 - (raw_s & 1023)) & 1023);                                \
    const unsigned base = (unsigned)__cvta_generic_to_shared(sm);                              \
    unsigned int* w = reinterpret_cast<unsigned int*>(sm);                                     \
    for (int i = threadIdx.x; i < WGMMA_IN_WORDS; i += blockDim.x) w[i] = in[i];               \
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                               \
    __syncthreads();                                                                           \
    float d[128];                                                                              \
    _Pragma("unroll") for (int i = 0; i < 128; ++i) d[i] = 0.f;                                \
    for (int it = 0; it < iters; ++it) {                                                       \
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");                                \
        _Pragma("unroll") for (int k = 0; k < WGMMA_STEPS; ++k) {                              \
            const unsigned long long da = wgmma_desc(base + 32 * k);                           \
            const unsigned long long db = wgmma_desc(base + WGMMA_TILE_A + 32 * k);            \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                         \
                         "wgmma.mma_async.sync.aligned." SHAPE_TYPES " " WGMMA_D_OPERANDS      \
                         ", %128, %129, p, 1, 1" EXTRA ";\n}\n"                                \
                         : WGMMA_D128 : "l"(da), "l"(db), "r"(1));                             \
        }                                                                                      \
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");                         \
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");                         \
    }                                                                                          \
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");                             \
    float s = 0.f;                                                                             \
    _Pragma("unroll") for (int i = 0; i < 128; ++i) s += d[i];                                 \
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;                                            \
}

#else

#define WGMMA_PROBE(NAME, SHAPE_TYPES, EXTRA)                                                  \
extern "C" __global__ void NAME(const unsigned int* __restrict__ in, int iters,               \
                                float* __restrict__ out) {                                     \
    __trap(); /* wgmma exists only in sm_90a: the host builds it for that target */            \
}

#endif

// m64n256k16, FP16 / BF16 inputs (both K-major: imm-trans-a = imm-trans-b = 0), FP32 accumulate.
WGMMA_PROBE(wgmma_fp16, "m64n256k16.f32.f16.f16", ", 0, 0")
WGMMA_PROBE(wgmma_bf16, "m64n256k16.f32.bf16.bf16", ", 0, 0")
// m64n256k32, FP8 e4m3 inputs, FP32 accumulate (the native FP8 path cuBLASLt uses on Hopper).
WGMMA_PROBE(wgmma_fp8e4m3, "m64n256k32.f32.e4m3.e4m3", "")
