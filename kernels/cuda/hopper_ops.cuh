// The Hopper (sm_90a) operations roofbench's kernels use, in one place: mbarriers, the TMA
// tensor copy, wgmma and the fences and register hints around them. Included by
// kernels/cuda/gemm_wgmma.cu and roofs/probes/cuda/wgmma.cu. Header-free (NVRTC has no
// default include path).
//
// Three parts:
//   1. the shared-memory matrix descriptor (plain integer code, also built on the host);
//   2. the primitives, one inline-asm wrapper each, compiled only for sm_90a. The CPU emulation
//      (tests/standins/cuda_emu/hopper_emu.h) defines RB_HOPPER_EMULATED and its own implementation of
//      exactly these functions, so the kernels run unchanged on the host;
//   3. what is built on the primitives: the mbarrier wait, bounded when RB_BOUNDED_WAIT is
//      defined (a trap with a message naming the barrier and phase instead of a hang).
// RB_HOPPER is defined when parts 2 and 3 exist (sm_90a, or the emulation).
#pragma once

// ------------------------------------------------------------- 1. matrix descriptor
// wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address,
// leading and stride byte offsets, each (x & 0x3FFFF) >> 4 in 14 bits at bits 0, 16 and 32;
// base offset 0 (every operand tile starts on a 1024-byte boundary); 128-byte swizzle (mode 1
// in bits 62-63).
__device__ __forceinline__ unsigned long long gmma_desc(unsigned addr, unsigned lbo,
                                                        unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) |
           ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// ------------------------------------------------------------------ 2. primitives
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(RB_HOPPER_EMULATED)
#define RB_HOPPER 1

// Dynamic shared memory of the kernel (a macro: the emulation binds the name differently).
#define RB_DYNAMIC_SMEM(name) extern __shared__ unsigned char name[]
// A static shared array (the emulation places it in its shared window).
#define RB_STATIC_SMEM(type, name, count) __shared__ type name[count]

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// mbarriers (shared::cta, 64-bit objects at `bar`)
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// The barrier inits visible to the async proxy (TMA) and the other threads.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Arrive once and expect `bytes` more transaction bytes in the current phase.
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// True once the phase of parity `parity` has completed (may suspend for a while first).
__device__ __forceinline__ bool mbar_try_wait(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}

// Generic-proxy shared-memory writes of this thread -> visible to the async proxy (wgmma, TMA).
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Named barrier `id` over `count` threads (a warpgroup alone: bar.sync 1, 128).
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned count) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// TMA: box at coordinates (c0 innermost, c1) of the tensor map -> shared memory at `dst`,
// completing its bytes as transactions on the mbarrier `bar`.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* map, int c0, int c1,
                                            unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];"
        ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// Warpgroup register budgets (take effect under __launch_bounds__(threads, 1)).
template <int REGS> __device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS> __device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

// wgmma: fence before the first mma_async (and after touching its registers), commit the
// issued ones as a group, wait until at most N groups are pending.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

#define RB_WG_D_OPERANDS                                                                     \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "       \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "       \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "       \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "       \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "       \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, " \
    "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, "   \
    "%125, %126, %127}"
#define RB_WG_D8(i)                                                                          \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),              \
        "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define RB_WG_D128                                                                           \
    RB_WG_D8(0), RB_WG_D8(8), RB_WG_D8(16), RB_WG_D8(24), RB_WG_D8(32), RB_WG_D8(40),        \
        RB_WG_D8(48), RB_WG_D8(56), RB_WG_D8(64), RB_WG_D8(72), RB_WG_D8(80), RB_WG_D8(88),   \
        RB_WG_D8(96), RB_WG_D8(104), RB_WG_D8(112), RB_WG_D8(120)

// D[64x256] += A[64xK] B[Kx256], FP32 accumulators (128 per thread), A and B from shared memory
// descriptors; A K-major; B K-major (TRANS_B 0) or N-major (TRANS_B 1, 16-bit types only).
template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n256k16_f16(float (&d)[128], unsigned long long da,
                                                     unsigned long long db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " RB_WG_D_OPERANDS
                 ", %128, %129, p, 1, 1, 0, %131;\n}\n"
                 : RB_WG_D128
                 : "l"(da), "l"(db), "r"(1), "n"(TRANS_B));
}
template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], unsigned long long da,
                                                      unsigned long long db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " RB_WG_D_OPERANDS
                 ", %128, %129, p, 1, 1, 0, %131;\n}\n"
                 : RB_WG_D128
                 : "l"(da), "l"(db), "r"(1), "n"(TRANS_B));
}
__device__ __forceinline__ void wgmma_m64n256k32_e4m3(float (&d)[128], unsigned long long da,
                                                      unsigned long long db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " RB_WG_D_OPERANDS
                 ", %128, %129, p, 1, 1;\n}\n"
                 : RB_WG_D128
                 : "l"(da), "l"(db), "r"(1));
}

#elif defined(RB_HOPPER_EMULATED)
#define RB_HOPPER 1  // tests/standins/cuda_emu/hopper_emu.h has defined the primitives
#endif

// ------------------------------------------------------------- 3. built on them
#if defined(RB_HOPPER)

#ifndef RB_WAIT_LIMIT_CYCLES
#define RB_WAIT_LIMIT_CYCLES 4000000000ll  // about 2 s at Hopper clocks; a real wait is us
#endif

// Wait until the phase of parity `parity` of barrier `bar` has completed. `name` and `index`
// (a string literal and the stage) only label the trap message of the bounded build.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity, const char* name,
                                          int index) {
#if defined(RB_BOUNDED_WAIT)
    if (mbar_try_wait(bar, parity)) return;
    const long long t0 = clock64();
    while (!mbar_try_wait(bar, parity)) {
        if (clock64() - t0 > RB_WAIT_LIMIT_CYCLES) {
            printf("roofbench: mbarrier wait timed out: %s[%d] (shared 0x%x) parity %u, "
                   "block %d thread %d\n",
                   name, index, bar, parity, (int)blockIdx.x, (int)threadIdx.x);
            __trap();
        }
    }
#else
    (void)name;
    (void)index;
    while (!mbar_try_wait(bar, parity)) {
    }
#endif
}

#endif  // RB_HOPPER
