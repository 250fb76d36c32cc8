// gemm_wgmma_<dt>: Hopper (sm_90a) tensor-core GEMM, C[M,N] = A[M,K] B[K,N], all row-major,
// FP32 accumulation, C stored in the input dtype (fp16, bf16, fp8 e4m3 as gemm.cu's tensor
// variant). NOT YET VALIDATED ON HARDWARE (see kernels/cuda_impl.py NOT_VALIDATED_ON_HARDWARE).
//
// Design (read from public descriptions: fast.cu's Hopper GEMM worklog, DeepGEMM, the CUTLASS
// and PTX docs; no code copied):
//   * One CTA per 128 x 256 output tile (WG_BM x WG_BN), 3 warpgroups (384 threads):
//     warpgroup 0 is the producer (setmaxnreg.dec), warpgroups 1-2 are consumers
//     (setmaxnreg.inc), each owning 64 rows x 256 columns: 128 FP32 accumulators per thread.
//   * The producer fills a WG_STAGES-deep shared-memory ring with TMA (cp.async.bulk.tensor,
//     tensor maps encoded on the host, passed as __grid_constant__ parameters). Raw mbarriers:
//     full[s] (data landed: TMA transaction bytes) and empty[s] (both consumers done reading).
//   * Consumers run wgmma.mma_async m64n256k16 (fp16/bf16) or m64n256k32 (e4m3) straight from
//     shared memory, one commit group per k tile, and release the stage as soon as that group
//     has completed (wait_group 0): a stage is never held while its reader waits for the next
//     one, so all WG_STAGES of the ring prefetch. The two consumer warpgroups interleave.
//   * A: K-major tile [128 rows][128 bytes of k], 128-byte swizzle (TMA and wgmma agree).
//     B fp16/bf16: B is N-major in memory; TMA loads it as 4 boxes [k][64 n] with the 128-byte
//     swizzle and wgmma reads it transposed (imm-trans-b = 1; MN-major descriptor).
//     B fp8: wgmma has no transpose for 8-bit types, so TMA lands a [128 k][256 n] tile in a
//     double-buffered staging area and the producer warpgroup's 128 threads transpose it into
//     the K-major swizzled layout (4x4 byte transposes with PRMT), then fence.proxy.async.
//   * Edges: TMA zero-fills out-of-bounds boxes (odd M, partial tiles, K tail); stores of C
//     are guarded per element. TMA needs every row stride to be a multiple of 16 bytes, so
//     K and N must be multiples of 16 / sizeof(T): the host refuses other sizes.
//   * Tile order: grouped raster (WG_GROUP_M tile rows per group) for L2 reuse; the Python
//     model kernels/cuda_impl.py:wgmma_tile reproduces it and the tests check it covers every
//     output element exactly once.
#include "common.cuh"
// constants, tile schedule, fp8 transpose (host-testable):
#include "wgmma_layout.cuh"
// mbarrier, TMA, wgmma, fences (the emulation in tests/standins/cuda_emu replaces its primitives):
#include "hopper_ops.cuh"

// A CUtensorMap as the driver encodes it: 128 opaque bytes, 64-byte aligned (cuda.h is not
// needed: NVRTC has no default include path).
struct __align__(64) TmaDesc { unsigned long long v[16]; };

#if defined(RB_HOPPER)

// D[64x256] += A[64xK] B[Kx256], one k step (16 values for 16-bit types, 32 for fp8). A is
// K-major; B is N-major for 16-bit types (read transposed), K-major for fp8.
template <typename T> struct Wgmma;
template <> struct Wgmma<__half> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long da,
                                               unsigned long long db) {
        wgmma_m64n256k16_f16<1>(d, da, db);
    }
};
template <> struct Wgmma<__nv_bfloat16> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long da,
                                               unsigned long long db) {
        wgmma_m64n256k16_bf16<1>(d, da, db);
    }
};
template <> struct Wgmma<fp8_t> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long da,
                                               unsigned long long db) {
        wgmma_m64n256k32_e4m3(d, da, db);
    }
};

// ---------------------------------------------------------------------- output stores
template <typename T> struct Store2;
template <> struct Store2<__half> {
    static __device__ __forceinline__ void run(__half* p, float a, float b) {
        *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
    }
};
template <> struct Store2<__nv_bfloat16> {
    static __device__ __forceinline__ void run(__nv_bfloat16* p, float a, float b) {
        *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
    }
};
template <> struct Store2<fp8_t> {
    static __device__ __forceinline__ void run(fp8_t* p, float a, float b) {
        *reinterpret_cast<unsigned short*>(p) =
            __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    }
};

// ---------------------------------------------------------------------------- the kernel
template <typename T>
__device__ __forceinline__ void gemm_wgmma(const TmaDesc* tmA, const TmaDesc* tmB, T* C,
                                           int M, int N, int K) {
    constexpr bool FP8 = sizeof(T) == 1;
    constexpr int STAGES = FP8 ? WG_STAGES_8 : WG_STAGES_16;
    constexpr int BK = WG_BK_BYTES / (int)sizeof(T);
    RB_DYNAMIC_SMEM(smem_raw);
    // Offset (not an integer cast) keeps the pointer in the shared window: LDS/STS, not LD/ST.
    unsigned char* smem =
        smem_raw + ((WG_SMEM_ALIGN - (smem_u32(smem_raw) & (WG_SMEM_ALIGN - 1))) &
                    (WG_SMEM_ALIGN - 1));
    unsigned char* staging = smem + STAGES * WG_STAGE_BYTES;
    unsigned long long* bars = reinterpret_cast<unsigned long long*>(
        staging + (FP8 ? 2 * WG_STAGING_BYTES : 0));
    const unsigned base = smem_u32(smem);
    const unsigned full0 = smem_u32(bars), empty0 = full0 + 8 * STAGES;
    const unsigned sfull0 = empty0 + 8 * STAGES;  // fp8 staging barriers

    const int tid = threadIdx.x, wg = tid >> 7, t = tid & 127;
    const int tiles_m = (M + WG_BM - 1) / WG_BM, tiles_n = (N + WG_BN - 1) / WG_BN;
    int tm, tn;
    wgmma_tile(blockIdx.x, tiles_m, tiles_n, tm, tn);
    const int m0 = tm * WG_BM, n0 = tn * WG_BN;
    const int ktiles = (K + BK - 1) / BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            // fp8: TMA's transaction (A) plus the producer's arrival after the transpose (B).
            mbar_init(full0 + 8 * s, FP8 ? 2 : 1);
            mbar_init(empty0 + 8 * s, 2 * 128);  // every consumer thread arrives
        }
        if constexpr (FP8) {
            mbar_init(sfull0, 1);
            mbar_init(sfull0 + 8, 1);
        }
        mbar_init_fence();
        fence_proxy_async();
    }
    __syncthreads();

    if (wg == 0) {
        // ------------------------------------------------------------------ producer
        setmaxnreg_dec<WG_PRODUCER_REGS>();
        if constexpr (!FP8) {
            if (t == 0) {
                for (int kt = 0; kt < ktiles; ++kt) {
                    const int s = kt % STAGES;
                    const unsigned full = full0 + 8 * s, sa = base + s * WG_STAGE_BYTES;
                    if (kt >= STAGES)
                        mbar_wait(empty0 + 8 * s, ((kt / STAGES) & 1) ^ 1, "empty", s);
                    mbar_expect_tx(full, WG_STAGE_BYTES);
                    tma_load_2d(sa, tmA, kt * BK, m0, full);
#pragma unroll
                    for (int j = 0; j < WG_BN / 64; ++j)  // 4 boxes of [BK][64 n]
                        tma_load_2d(sa + WG_A_BYTES + j * (BK * 128), tmB, n0 + 64 * j,
                                    kt * BK, full);
                }
            }
        } else {
            if (t == 0 && ktiles > 0) {
                mbar_expect_tx(sfull0, WG_STAGING_BYTES);
                tma_load_2d(smem_u32(staging), tmB, n0, 0, sfull0);
            }
            for (int kt = 0; kt < ktiles; ++kt) {
                const int s = kt % STAGES, sb = kt & 1;
                const unsigned full = full0 + 8 * s, sa = base + s * WG_STAGE_BYTES;
                if (kt >= STAGES)
                    mbar_wait(empty0 + 8 * s, ((kt / STAGES) & 1) ^ 1, "empty", s);
                if (t == 0) {
                    mbar_expect_tx(full, WG_A_BYTES);
                    tma_load_2d(sa, tmA, kt * BK, m0, full);
                    if (kt + 1 < ktiles) {  // next B tile lands while this one is transposed
                        const unsigned nb = sfull0 + 8 * (sb ^ 1);
                        mbar_expect_tx(nb, WG_STAGING_BYTES);
                        tma_load_2d(smem_u32(staging + (sb ^ 1) * WG_STAGING_BYTES), tmB, n0,
                                    (kt + 1) * BK, nb);
                    }
                }
                mbar_wait(sfull0 + 8 * sb, (kt >> 1) & 1, "staging", sb);
                transpose_fp8_tile(
                    reinterpret_cast<const unsigned*>(staging + sb * WG_STAGING_BYTES),
                    smem + s * WG_STAGE_BYTES + WG_A_BYTES, t);
                // Generic-proxy writes -> visible to wgmma (async proxy); staging reads done
                // before the next TMA overwrites it.
                fence_proxy_async();
                named_barrier_sync(1, 128);
                if (t == 0) mbar_arrive(full);
            }
        }
        return;
    }

    // ---------------------------------------------------------------------- consumers
    setmaxnreg_inc<WG_CONSUMER_REGS>();
    const int cw = wg - 1;  // rows cw*64 .. +63 of the tile
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;

    for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(full0 + 8 * s, (kt / STAGES) & 1, "full", s);
        const unsigned sa = base + s * WG_STAGE_BYTES + cw * 64 * WG_BK_BYTES;
        const unsigned sb = base + s * WG_STAGE_BYTES + WG_A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {  // 4 k steps of 32 bytes
            // A K-major: 8-row groups 1024 B apart; a k step moves 32 B inside the swizzled
            // row. B fp16/bf16 N-major: 64-column atoms BK*128 B apart (LBO), 8-k groups
            // 1024 B apart (SBO), a k step of 16 rows = 2048 B. B fp8 K-major like A.
            const unsigned long long da = gmma_desc(sa + 32 * kk, 16, 1024);
            const unsigned long long db = FP8 ? gmma_desc(sb + 32 * kk, 16, 1024)
                                              : gmma_desc(sb + 2048 * kk, BK * 128, 1024);
            Wgmma<T>::run(d, da, db);
        }
        wgmma_commit();
        // Release the stage as soon as the group that read it has completed, so that every
        // stage of the ring can be loading while this warpgroup waits for the next one (the
        // other consumer warpgroup keeps the tensor cores busy meanwhile).
        wgmma_wait<0>();
        mbar_arrive(empty0 + 8 * s);
    }

    // Accumulator layout (per warp w of the warpgroup, lane l): for column block j (8 wide),
    // d[4j], d[4j+1] at row 16w + l/4, columns 8j + 2(l%4) + {0,1}; d[4j+2], d[4j+3] 8 rows
    // below. N is a multiple of the pair width (host check), so a pair is in or out whole.
    const int warp = t >> 5, lane = t & 31;
    const int r0 = m0 + cw * 64 + warp * 16 + (lane >> 2);
    const int c0 = n0 + 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const int col = c0 + 8 * j;
        if (col >= N) continue;
        if (r0 < M) Store2<T>::run(C + (i64)r0 * N + col, d[4 * j], d[4 * j + 1]);
        if (r0 + 8 < M) Store2<T>::run(C + (i64)(r0 + 8) * N + col, d[4 * j + 2], d[4 * j + 3]);
    }
}

#define RB_GEMM_WG(SUF, T)                                                                   \
    extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)                              \
        gemm_wgmma_##SUF(const __grid_constant__ TmaDesc tmA,                                \
                         const __grid_constant__ TmaDesc tmB, T* C, i64 M, i64 N, i64 K) {   \
        gemm_wgmma<T>(&tmA, &tmB, C, (int)M, (int)N, (int)K);                                \
    }

#else  // not sm_90a: wgmma, setmaxnreg and the arch-specific TMA forms do not exist

#define RB_GEMM_WG(SUF, T)                                                                   \
    extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)                              \
        gemm_wgmma_##SUF(const __grid_constant__ TmaDesc tmA,                                \
                         const __grid_constant__ TmaDesc tmB, T* C, i64 M, i64 N, i64 K) {   \
        __trap(); /* the host launches it only on compute capability 9.0, built sm_90a */    \
    }

#endif

RB_GEMM_WG(fp16, __half)
RB_GEMM_WG(bf16, __nv_bfloat16)
RB_GEMM_WG(fp8, fp8_t)
