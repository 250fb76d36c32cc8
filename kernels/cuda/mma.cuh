// The warp-wide m16n8k16 (fp16, bf16) and m16n8k32 (fp8 e4m3) tensor-core mma, FP32
// accumulate, shared by the gemm and attention kernels: d += a (4 A fragment words) x b (2 B
// words). Under tests/standins/cuda_emu (RB_HOST_EMU) the CPU emulation stands in: it is
// handed the same instruction string and refuses one whose shape or operand types are not
// those of T (a bf16 fragment multiplied as .f16 would be garbage on the GPU).
#pragma once
#include "common.cuh"

// One mma.sync on d, a and b; only the instruction's shape and types differ between types.
#define RB_MMA_SYNC(INSTR)                                                                   \
    asm volatile(INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"            \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#ifdef RB_HOST_EMU  // CPU emulation of the warp-wide mma
#define RB_MMA_16BIT(T, INSTR) rb_emu_mma_ptx<T>(INSTR, d, a, b)
#else
#define RB_MMA_16BIT(T, INSTR) RB_MMA_SYNC(INSTR)
#endif
#define RB_MMA_ARGS float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]

template <typename T> struct Mma;
template <> struct Mma<__half> {
    static __device__ __forceinline__ void run(RB_MMA_ARGS) {
        RB_MMA_16BIT(__half, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
    }
};
template <> struct Mma<__nv_bfloat16> {
    static __device__ __forceinline__ void run(RB_MMA_ARGS) {
        RB_MMA_16BIT(__nv_bfloat16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
    }
};
template <> struct Mma<fp8_t> {
    static __device__ __forceinline__ void run(RB_MMA_ARGS) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890) || defined(RB_HOST_EMU)
        RB_MMA_16BIT(fp8_t, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32");
#else
        __trap();  // FP8 tensor cores need sm_89+; the host never launches this (min_cc)
#endif
    }
};
