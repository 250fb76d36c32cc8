// Tensor-core ceilings through the legacy warp-level mma.sync path, operands in registers.
// Each warp loads its A and B fragments once (from `in`, so nothing is constant) and then runs
// `iters` x MMA_ACC independent mma.sync into MMA_ACC accumulator sets (enough to cover the MMA
// latency), so the loop touches no memory at all. The accumulators are summed and stored: no
// MMA is dead. FLOPs per launch = warps x iters x MMA_ACC x 2 x M x N x K.
// On Hopper (sm_90) mma.sync is the legacy path: it does not reach the wgmma peak that cuBLAS
// uses, so this is reported as the "mma.sync ceiling", apart from the library ceiling.
// Header-free inline PTX: NVRTC and nvcc alike.
#define MMA_ACC 8

#define MMA_KERNEL(NAME, SHAPE_TYPES, KDIM)                                                    \
extern "C" __global__ void NAME(const unsigned int* __restrict__ in, int iters,               \
                                float* __restrict__ out) {                                     \
    const int lane = threadIdx.x & 31;                                                         \
    unsigned int a0 = in[lane * 6 + 0], a1 = in[lane * 6 + 1], a2 = in[lane * 6 + 2],          \
                 a3 = in[lane * 6 + 3], b0 = in[lane * 6 + 4], b1 = in[lane * 6 + 5];          \
    float d[MMA_ACC][4];                                                                       \
    _Pragma("unroll") for (int k = 0; k < MMA_ACC; ++k)                                       \
        d[k][0] = d[k][1] = d[k][2] = d[k][3] = 0.f;                                           \
    for (int i = 0; i < iters; ++i) {                                                          \
        _Pragma("unroll") for (int k = 0; k < MMA_ACC; ++k) {                                  \
            asm volatile("mma.sync.aligned." SHAPE_TYPES                                       \
                         " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"    \
                         : "+f"(d[k][0]), "+f"(d[k][1]), "+f"(d[k][2]), "+f"(d[k][3])          \
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));              \
        }                                                                                      \
    }                                                                                          \
    float s = 0.f;                                                                             \
    _Pragma("unroll") for (int k = 0; k < MMA_ACC; ++k)                                       \
        s += (d[k][0] + d[k][1]) + (d[k][2] + d[k][3]);                                        \
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;                                            \
}

// m16n8k16, FP16 / BF16 inputs, FP32 accumulate (sm_80+): 4096 FLOP per warp instruction.
MMA_KERNEL(mma_fp16, "m16n8k16.row.col.f32.f16.f16.f32", 16)
MMA_KERNEL(mma_bf16, "m16n8k16.row.col.f32.bf16.bf16.f32", 16)
// m16n8k8, TF32 inputs, FP32 accumulate (sm_80+): 2048 FLOP per warp instruction.
MMA_KERNEL(mma_tf32, "m16n8k8.row.col.f32.tf32.tf32.f32", 8)
// m16n8k32, FP8 e4m3 inputs, FP32 accumulate (sm_89+): 8192 FLOP per warp instruction.
// Native (QMMA) on sm_89 (Ada). Hopper has no native FP8 mma.sync: ptxas lowers it to an FP8 ->
// FP16 unpack plus HMMA.16816 and, with loop-invariant operands, even folds the products into
// FADDs, so on sm_90 this would measure nothing of the tensor cores; FP8 there needs wgmma
// (library ceiling only). The tests prove both facts from SASS (ROOFBENCH_FP8_MMA_ON_SM90
// compiles it for sm_90 anyway, for that proof).
#if !defined(__CUDA_ARCH__) || (__CUDA_ARCH__ >= 890 && \
    (__CUDA_ARCH__ != 900 || defined(ROOFBENCH_FP8_MMA_ON_SM90)))
MMA_KERNEL(mma_fp8e4m3, "m16n8k32.row.col.f32.e4m3.e4m3.f32", 32)
#endif
