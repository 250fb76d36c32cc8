// The parts of gemm_wgmma.cu that are plain integer/byte code, kept apart so that the host
// tests compile this very text with g++ (tests/kernels/test_wgmma.py): the tile constants (also read
// by kernels/cuda_impl.py), the CTA -> tile schedule and the fp8 B transpose into the
// 128-byte-swizzled K-major layout wgmma reads. Needs uint4/make_uint4 and __byte_perm.
#pragma once

#define WG_BM 128        // tile rows (2 consumer warpgroups x 64)
#define WG_BN 256        // tile columns (wgmma N)
#define WG_BK_BYTES 128  // k per stage in bytes: 64 fp16/bf16 or 128 fp8 (one 128-byte row)
#define WG_STAGES_16 4   // ring depth, fp16/bf16: 4 x 48 KiB
#define WG_STAGES_8 3    // ring depth, fp8: 3 x 48 KiB + 2 x 32 KiB staging
#define WG_GROUP_M 8     // tile rows per raster group
#define WG_THREADS 384   // 1 producer + 2 consumer warpgroups
#define WG_PRODUCER_REGS 56
#define WG_CONSUMER_REGS 224
#define WG_SMEM_ALIGN 1024  // the 128-byte swizzle pattern repeats every 1024 bytes

// Shared-memory map (bytes from the 1024-aligned base): stage s at s * WG_STAGE_BYTES holds
// A [WG_BM][128 B] then B [WG_BN][128 B]; fp8 staging buffers follow the ring; the mbarriers
// sit after everything.
#define WG_A_BYTES (WG_BM * WG_BK_BYTES)
#define WG_B_BYTES (WG_BN * WG_BK_BYTES)
#define WG_STAGE_BYTES (WG_A_BYTES + WG_B_BYTES)
#define WG_STAGING_BYTES (WG_BN * WG_BK_BYTES)

// ------------------------------------------------------------------------- tile schedule
// Grouped raster: WG_GROUP_M consecutive tile rows share each group of CTAs, so the B columns
// they read stay in L2. Mirrored by kernels/cuda_impl.py:wgmma_tile.
__device__ __forceinline__ void wgmma_tile(int bid, int tiles_m, int tiles_n, int& tm,
                                           int& tn) {
    const int per_group = WG_GROUP_M * tiles_n;
    const int group = bid / per_group;
    const int first_m = group * WG_GROUP_M;
    const int rows = tiles_m - first_m < WG_GROUP_M ? tiles_m - first_m : WG_GROUP_M;
    const int in_group = bid - group * per_group;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
}

// ----------------------------------------------------------- fp8 B transpose (producer)
// Staging tile: [128 k][256 n] bytes, rows of 64 words. Output: B K-major [256 n][128 k],
// 16-byte chunk c of row n stored at chunk c ^ (n & 7) (the 128-byte swizzle). Thread t owns
// columns 4*(t & 63) .. +3 and k chunks (t >> 6), +2, +4, +6. A 4x4 byte transpose per word
// quad; store s of thread t writes row n = 4*n4 + ((s + n4/2) & 3), n4 = t & 63, whose chunk
// position (kc ^ n) & 7 takes all 8 values over any 8 consecutive lanes: a warp's 16-byte
// stores take the 4 wavefronts its 512 bytes need (rotating by (s + n4) & 3 reached only 4
// positions: 8 wavefronts), and each thread still stores each of its 4 rows once.

// Word of the staging tile that thread t loads as word j (0..15) of k chunk kc.
__device__ __forceinline__ int fp8_load_word(int t, int kc, int j) {
    return (kc * 16 + j) * 64 + (t & 63);
}
// Row quad (0..3: which of its 4 columns) that thread t stores in its store s (0..3).
__device__ __forceinline__ int fp8_store_quad(int t, int s) {
    return (s + ((t & 63) >> 1)) & 3;
}
// Byte offset in the B tile of thread t's store s of k chunk kc (16 bytes).
__device__ __forceinline__ int fp8_store_offset(int t, int kc, int s) {
    const int n = 4 * (t & 63) + fp8_store_quad(t, s);
    return n * WG_BK_BYTES + ((kc ^ (n & 7)) << 4);
}

__device__ __forceinline__ void transpose_fp8_tile(const unsigned* __restrict__ stg,
                                                   unsigned char* __restrict__ bs, int t) {
#pragma unroll 1
    for (int kc = t >> 6; kc < 8; kc += 2) {
        unsigned w[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) w[j] = stg[fp8_load_word(t, kc, j)];
        uint4 c[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            unsigned q[4];
#pragma unroll
            for (int h = 0; h < 4; ++h) {
                const unsigned sel = (unsigned)i | ((unsigned)(4 + i) << 4);
                const unsigned lo = __byte_perm(w[4 * h], w[4 * h + 1], sel);
                const unsigned hi = __byte_perm(w[4 * h + 2], w[4 * h + 3], sel);
                q[h] = __byte_perm(lo, hi, 0x5410);
            }
            c[i] = make_uint4(q[0], q[1], q[2], q[3]);
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int i = fp8_store_quad(t, s);
            const uint4 v = i == 0 ? c[0] : i == 1 ? c[1] : i == 2 ? c[2] : c[3];
            *reinterpret_cast<uint4*>(bs + fp8_store_offset(t, kc, s)) = v;
        }
    }
}
