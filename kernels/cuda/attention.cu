// attention forward: O = softmax(Q K^T * scale) V per (batch, head), Q/K/V/O[bh][N][D] row-major,
// fp16/bf16 storage, FP32 accumulation, tensor cores (mma.sync m16n8k16) for both products.
// D (the head dim) is 64 or 128 (the host refuses others); N is any length (tails masked and
// zero-filled). The batch x head index is blockIdx.y (flash, pv) or blockIdx.z (scores).
//   naive = three launches through global memory:
//     attn_scores_<dt>   S = Q K^T (unscaled), the whole N x N per head, stored in the dtype;
//     attn_softmax_<dt>  P = softmax(S * scale) row by row (attn_softmax_causal_<dt>: keys
//                        after the query masked, their P written as 0), one block per row,
//                        the row held in registers (N <= ATT_ROW_MAX = 16384);
//     attn_pv_<dt>       O = P V (the whole P, masked zeros included, as standard attention).
//   flash = attn_flash_<dt> (attn_flash_causal_<dt>: key tiles after the diagonal skipped):
//     one launch; each block holds 64 query rows, streams 64-key tiles of K and V through
//     shared memory and keeps S, the running max and sum and O in registers (online softmax,
//     FlashAttention-2's loop). S never reaches memory.
// Every block is 4 warps; a warp owns 16 query rows. Fragment layouts are the PTX ISA's for
// mma.m16n8k16 (the same as gemm.cu's tensor kernel): A rows g and g+8, k pairs 2t and 2t+8;
// B column g, k pairs 2t and 2t+8; C rows g, g+8, columns 2t, 2t+1 (g = lane/4, t = lane%4).
// The C fragment of S is, pair for pair, the A fragment of P for the second product, so P goes
// from the scores' accumulators to the PV mma without shared memory.
#include "common.cuh"
#include "mma.cuh"

#define ATT_BM 64       // query rows per block
#define ATT_BN 64       // keys per tile
#define ATT_THREADS 128
#define ATT_DMAX 128
#define ATT_PAD 4       // words of padding per shared row: fragment reads hit 32 banks
#define ATT_KW (ATT_BN / 2 + ATT_PAD)  // words per row of a transposed V tile / a P tile
#define ATT_SM_THREADS 512
#define ATT_ROW_MAX 16384  // longest softmax row (ATT_SM_THREADS x ATT_ROW_VALS)
#define ATT_ROW_VALS 32
#define ATT_NEG (-3.0e38f)  // a masked score: finite, so no inf - inf anywhere

#define ATT_DW(d) ((d) / 2 + ATT_PAD)  // words per shared row of a [64][d] tile

// Two values as one 32-bit fragment word (the lower k in the low half).
template <typename T> __device__ __forceinline__ unsigned att_pack2(float lo, float hi) {
    union { unsigned u; T h[2]; } w;
    w.h[0] = from_acc<T>(lo);
    w.h[1] = from_acc<T>(hi);
    return w.u;
}

// ATT_BM rows [r0, r0 + 64) of a [n][D] matrix into shared words, row stride ATT_DW(D); rows
// at or past n are zero. Rows are D * 2 bytes (a multiple of 16) and buffers 256-byte aligned,
// so every 16-byte load is aligned.
template <typename T, int D>
__device__ __forceinline__ void att_load_rows(unsigned* sm, const T* __restrict__ src, i64 r0,
                                              i64 n) {
    constexpr int CH = D / 8;  // 16-byte chunks per row
    constexpr int DW = ATT_DW(D);
#pragma unroll
    for (int it = 0; it < ATT_BM * CH / ATT_THREADS; ++it) {
        const int c = threadIdx.x + it * ATT_THREADS, r = c / CH, ch = c % CH;
        uint4 v = uint4{0u, 0u, 0u, 0u};
        if (r0 + r < n) v = *reinterpret_cast<const uint4*>(src + (r0 + r) * D + ch * 8);
        *reinterpret_cast<uint4*>(&sm[r * DW + ch * 4]) = v;
    }
}

// A 64-key tile of V (keys [j0, j0 + 64) of [n][D]) transposed into vt[d][key pair]: word
// (d, p) holds keys 2p and 2p + 1 of column d, the pair a B fragment of P V needs. Keys at or
// past n are zero (their P is zero too; zero V keeps 0 x garbage out of O).
template <typename T, int D>
__device__ __forceinline__ void att_load_vt(unsigned* vt, const T* __restrict__ v, i64 j0,
                                            i64 n) {
    constexpr int CH = D / 8;
#pragma unroll
    for (int it = 0; it < (ATT_BN / 2) * CH / ATT_THREADS; ++it) {
        const int item = threadIdx.x + it * ATT_THREADS, p = item % (ATT_BN / 2),
                  ch = item / (ATT_BN / 2);
        union { uint4 u; T h[8]; } a, b;
        a.u = b.u = uint4{0u, 0u, 0u, 0u};
        const i64 k0 = j0 + 2 * p;
        if (k0 < n) a.u = *reinterpret_cast<const uint4*>(v + k0 * D + ch * 8);
        if (k0 + 1 < n) b.u = *reinterpret_cast<const uint4*>(v + (k0 + 1) * D + ch * 8);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            union { unsigned u; T h[2]; } w;
            w.h[0] = a.h[c];
            w.h[1] = b.h[c];
            vt[(ch * 8 + c) * ATT_KW + p] = w.u;
        }
    }
}

// acc[8 key tiles] = (16 rows of this warp) x (64 rows of sm)^T over D: S of a Q and a K tile.
template <typename T, int D>
__device__ __forceinline__ void att_qk(float (&acc)[8][4], const unsigned (&qf)[D / 16][4],
                                       const unsigned* ks) {
    constexpr int DW = ATT_DW(D);
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[ni][r] = 0.f;
#pragma unroll
    for (int ks_ = 0; ks_ < D / 16; ++ks_) {
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
            const unsigned* base = &ks[(ni * 8 + g) * DW + ks_ * 8 + t];
            const unsigned b[2] = {base[0], base[4]};
            Mma<T>::run(acc[ni], qf[ks_], b);
        }
    }
}

// The A fragments of this warp's 16 rows of a [64][D] shared tile.
template <int D>
__device__ __forceinline__ void att_frags(unsigned (&qf)[D / 16][4], const unsigned* sm) {
    constexpr int DW = ATT_DW(D);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int ks_ = 0; ks_ < D / 16; ++ks_) {
        const unsigned* base = &sm[(warp * 16 + g) * DW + ks_ * 8 + t];
        qf[ks_][0] = base[0];
        qf[ks_][1] = base[8 * DW];
        qf[ks_][2] = base[4];
        qf[ks_][3] = base[8 * DW + 4];
    }
}

// oacc[D/8 column tiles] += P (A fragments, 4 k steps of 16 keys) x V tile (vt).
template <typename T, int D>
__device__ __forceinline__ void att_pv_tile(float (&oacc)[D / 8][4], const unsigned (&pf)[4][4],
                                            const unsigned* vt) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int dn = 0; dn < D / 8; ++dn) {
            const unsigned* base = &vt[(dn * 8 + g) * ATT_KW + kk * 8 + t];
            const unsigned b[2] = {base[0], base[4]};
            Mma<T>::run(oacc[dn], pf[kk], b);
        }
}

// Store this warp's 16 x D rows of O (divided by the row sums) from C fragments.
template <typename T, int D>
__device__ __forceinline__ void att_store_o(T* __restrict__ o, const float (&oacc)[D / 8][4],
                                            i64 q0, i64 n, float inv0, float inv1) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const i64 r0 = q0 + warp * 16 + g, r1 = r0 + 8;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
        const int col = dn * 8 + 2 * t;
        if (r0 < n)
            *reinterpret_cast<unsigned*>(o + r0 * D + col) =
                att_pack2<T>(oacc[dn][0] * inv0, oacc[dn][1] * inv0);
        if (r1 < n)
            *reinterpret_cast<unsigned*>(o + r1 * D + col) =
                att_pack2<T>(oacc[dn][2] * inv1, oacc[dn][3] * inv1);
    }
}

__device__ __forceinline__ float att_quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float att_quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// ------------------------------------------------------------------------------------ flash
template <typename T, int D, bool CAUSAL>
__device__ __forceinline__ void attn_flash(const T* __restrict__ Q, const T* __restrict__ K,
                                           const T* __restrict__ V, T* __restrict__ O, i64 n,
                                           float scale, unsigned* ks, unsigned* vt) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const i64 head = (i64)blockIdx.y * n * D;
    const i64 q0 = (i64)blockIdx.x * ATT_BM;
    const float sl2 = scale * 1.4426950408889634f;  // exp(x * scale) = exp2(x * sl2)
    Q += head;
    K += head;
    V += head;
    O += head;

    unsigned qf[D / 16][4];
    att_load_rows<T, D>(ks, Q, q0, n);  // Q staged through the K buffer once
    __syncthreads();
    att_frags<D>(qf, ks);

    float oacc[D / 8][4];
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
        for (int r = 0; r < 4; ++r) oacc[dn][r] = 0.f;
    float m0 = ATT_NEG, m1 = ATT_NEG, l0 = 0.f, l1 = 0.f;  // rows g and g + 8 (scaled units)
    const i64 row0 = q0 + warp * 16 + g, row1 = row0 + 8;

    i64 tiles = (n + ATT_BN - 1) / ATT_BN;
    if (CAUSAL && tiles > (i64)blockIdx.x + 1) tiles = (i64)blockIdx.x + 1;  // BM == BN: up to the diagonal
    for (i64 tile = 0; tile < tiles; ++tile) {
        const i64 j0 = tile * ATT_BN;
        __syncthreads();  // the previous tile (or Q) is no longer read
        att_load_rows<T, D>(ks, K, j0, n);
        att_load_vt<T, D>(vt, V, j0, n);
        __syncthreads();

        float s[8][4];
        att_qk<T, D>(s, qf, ks);
        const bool edge = j0 + ATT_BN > n || (CAUSAL && j0 + ATT_BN > q0);
        float mx0 = ATT_NEG, mx1 = ATT_NEG;
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                float x = s[ni][r] * sl2;
                if (edge) {
                    const i64 j = j0 + ni * 8 + 2 * t + (r & 1);
                    const i64 row = r < 2 ? row0 : row1;
                    if (j >= n || (CAUSAL && j > row)) x = ATT_NEG;
                }
                s[ni][r] = x;
                if (r < 2) mx0 = fmaxf(mx0, x); else mx1 = fmaxf(mx1, x);
            }
        const float mn0 = fmaxf(m0, att_quad_max(mx0)), mn1 = fmaxf(m1, att_quad_max(mx1));
        const float c0 = exp2f(m0 - mn0), c1 = exp2f(m1 - mn1);
        m0 = mn0;
        m1 = mn1;
        float ps0 = 0.f, ps1 = 0.f;
        unsigned pf[4][4];
#pragma unroll
        for (int ni = 0; ni < 8; ++ni) {
            const float p0 = exp2f(s[ni][0] - mn0), p1 = exp2f(s[ni][1] - mn0);
            const float p2 = exp2f(s[ni][2] - mn1), p3 = exp2f(s[ni][3] - mn1);
            ps0 += p0 + p1;
            ps1 += p2 + p3;
            // C fragment of key tile ni -> A fragment of k step ni/2 (regs 0,1 or 2,3)
            pf[ni >> 1][(ni & 1) * 2 + 0] = att_pack2<T>(p0, p1);
            pf[ni >> 1][(ni & 1) * 2 + 1] = att_pack2<T>(p2, p3);
        }
        l0 = l0 * c0 + ps0;  // per-thread partial sums; the quad's are added at the end
        l1 = l1 * c1 + ps1;
#pragma unroll
        for (int dn = 0; dn < D / 8; ++dn) {
            oacc[dn][0] *= c0;
            oacc[dn][1] *= c0;
            oacc[dn][2] *= c1;
            oacc[dn][3] *= c1;
        }
        att_pv_tile<T, D>(oacc, pf, vt);
    }
    l0 = att_quad_sum(l0);
    l1 = att_quad_sum(l1);
    att_store_o<T, D>(O, oacc, q0, n, 1.f / l0, 1.f / l1);
}

// ------------------------------------------------------------------------------------ naive
// S tile (64 queries x 64 keys) = Q tile x K tile^T, stored unscaled in the dtype.
template <typename T, int D>
__device__ __forceinline__ void attn_scores(const T* __restrict__ Q, const T* __restrict__ K,
                                            T* __restrict__ S, i64 n, unsigned* qs,
                                            unsigned* ks) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const i64 h = blockIdx.z;
    const i64 q0 = (i64)blockIdx.x * ATT_BM, j0 = (i64)blockIdx.y * ATT_BN;
    att_load_rows<T, D>(qs, Q + h * n * D, q0, n);
    att_load_rows<T, D>(ks, K + h * n * D, j0, n);
    __syncthreads();
    unsigned qf[D / 16][4];
    att_frags<D>(qf, qs);
    float s[8][4];
    att_qk<T, D>(s, qf, ks);
    const i64 row0 = q0 + warp * 16 + g;
    T* s0 = S + (h * n + row0) * n + j0;  // rows g and g + 8 of this warp, from key j0
    T* s1 = s0 + 8 * n;
    const int cols = (int)(n - j0 < ATT_BN ? n - j0 : ATT_BN);
    const bool ok0 = row0 < n, ok1 = row0 + 8 < n;
#pragma unroll
    for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int j = ni * 8 + 2 * t + e;
            if (j < cols) {
                if (ok0) s0[j] = from_acc<T>(s[ni][e]);
                if (ok1) s1[j] = from_acc<T>(s[ni][2 + e]);
            }
        }
}

// P row = softmax(S row * scale): one block per row, read once into registers, written once.
// Rows are at most ATT_ROW_MAX long, so key indices are ints.
template <typename T, bool CAUSAL>
__device__ __forceinline__ void attn_softmax(const T* __restrict__ S, T* __restrict__ P, i64 n,
                                             float scale) {
    const i64 row = blockIdx.x;
    const int len = (int)n, i = (int)(row % n);
    const T* sr = S + row * n;
    T* pr = P + row * n;
    const float sl2 = scale * 1.4426950408889634f;
    const int nt = blockDim.x;
    float v[ATT_ROW_VALS];
    float mx = ATT_NEG;
#pragma unroll
    for (int k = 0; k < ATT_ROW_VALS; ++k) {
        const int j = threadIdx.x + k * nt;
        v[k] = ATT_NEG;
        if (j < len) v[k] = to_acc(sr[j]) * sl2;
        // masked: min(score, NEG) = NEG, a use of the score, so that every score is read as
        // the model counts (a dead load would be dropped)
        if (CAUSAL && j > i) v[k] = fminf(v[k], ATT_NEG);
        mx = fmaxf(mx, v[k]);
    }
    mx = block_max(mx, ATT_NEG);
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < ATT_ROW_VALS; ++k) {
        v[k] = exp2f(v[k] - mx);  // masked: exp2(-3e38) = 0
        sum += v[k];
    }
    const float inv = 1.f / block_sum(sum);
#pragma unroll
    for (int k = 0; k < ATT_ROW_VALS; ++k) {
        const int j = threadIdx.x + k * nt;
        if (j < len) pr[j] = from_acc<T>(v[k] * inv);
    }
}

// O rows (64 x D) = P rows x V, over every 64-key tile; P staged through shared memory.
template <typename T, int D>
__device__ __forceinline__ void attn_pv(const T* __restrict__ P, const T* __restrict__ V,
                                        T* __restrict__ O, i64 n, unsigned* ps, unsigned* vt) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const i64 h = blockIdx.y;
    const i64 q0 = (i64)blockIdx.x * ATT_BM;
    const T* ph = P + h * n * n;
    V += h * n * D;
    float oacc[D / 8][4];
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
        for (int r = 0; r < 4; ++r) oacc[dn][r] = 0.f;
    const bool vec = (n & 7) == 0;  // P rows 16-byte aligned
    for (i64 j0 = 0; j0 < n; j0 += ATT_BN) {
        __syncthreads();
        // P tile: 64 rows x 64 keys = 8 chunks of 8 values per row, 4 per thread.
#pragma unroll
        for (int it = 0; it < ATT_BM * 8 / ATT_THREADS; ++it) {
            const int c = threadIdx.x + it * ATT_THREADS, r = c >> 3, ch = c & 7;
            const i64 row = q0 + r, j = j0 + ch * 8;
            union { uint4 u; T h[8]; } w;
            w.u = uint4{0u, 0u, 0u, 0u};
            if (row < n) {
                if (vec && j + 8 <= n) {
                    w.u = *reinterpret_cast<const uint4*>(ph + row * n + j);
                } else {
#pragma unroll
                    for (int e = 0; e < 8; ++e)
                        if (j + e < n) w.h[e] = ph[row * n + j + e];
                }
            }
            *reinterpret_cast<uint4*>(&ps[r * ATT_KW + ch * 4]) = w.u;
        }
        att_load_vt<T, D>(vt, V, j0, n);
        __syncthreads();
        unsigned pf[4][4];
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            const unsigned* base = &ps[(warp * 16 + g) * ATT_KW + kk * 8 + t];
            pf[kk][0] = base[0];
            pf[kk][1] = base[8 * ATT_KW];
            pf[kk][2] = base[4];
            pf[kk][3] = base[8 * ATT_KW + 4];
        }
        att_pv_tile<T, D>(oacc, pf, vt);
    }
    att_store_o<T, D>(O + h * n * D, oacc, q0, n, 1.f, 1.f);
}

// Shared memory is declared once per kernel, sized for D = 128, and handed to either head dim
// (two instantiations' own __shared__ arrays would add up past the 48 KB static limit).
#define ATT_QK_WORDS (ATT_BM * (ATT_DMAX / 2 + ATT_PAD))
#define ATT_VT_WORDS (ATT_DMAX * ATT_KW)
#define ATT_P_WORDS (ATT_BM * ATT_KW)

// The statement, with D the head dim the launch asks for (64 or 128): each head dim its own
// instantiation, the branch uniform over the grid.
#define ATT_FOR_D(...)                                                                       \
    if (d == 128) {                                                                          \
        constexpr int D = 128;                                                               \
        __VA_ARGS__;                                                                         \
    } else {                                                                                 \
        constexpr int D = 64;                                                                \
        __VA_ARGS__;                                                                         \
    }

// attn_flash_<dt> (CAUSAL false) or attn_flash_causal_<dt>: either head dim, one signature.
#define RB_ATT_FLASH(NAME, T, CAUSAL)                                                        \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS)                               \
        NAME(const T* Q, const T* K, const T* V, T* O, i64 n, i64 d, float scale) {          \
        __shared__ __align__(16) unsigned ks[ATT_QK_WORDS];                                  \
        __shared__ __align__(16) unsigned vt[ATT_VT_WORDS];                                  \
        ATT_FOR_D(attn_flash<T, D, CAUSAL>(Q, K, V, O, n, scale, ks, vt));                   \
    }

#define RB_ATT(SUF, T)                                                                       \
    RB_ATT_FLASH(attn_flash_##SUF, T, false)                                                 \
    RB_ATT_FLASH(attn_flash_causal_##SUF, T, true)                                           \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS)                               \
        attn_scores_##SUF(const T* Q, const T* K, T* S, i64 n, i64 d) {                      \
        __shared__ __align__(16) unsigned qs[ATT_QK_WORDS];                                  \
        __shared__ __align__(16) unsigned ks[ATT_QK_WORDS];                                  \
        ATT_FOR_D(attn_scores<T, D>(Q, K, S, n, qs, ks));                                    \
    }                                                                                        \
    extern "C" __global__ void __launch_bounds__(ATT_SM_THREADS)                             \
        attn_softmax_##SUF(const T* S, T* P, i64 n, float scale) {                           \
        attn_softmax<T, false>(S, P, n, scale);                                              \
    }                                                                                        \
    extern "C" __global__ void __launch_bounds__(ATT_SM_THREADS)                             \
        attn_softmax_causal_##SUF(const T* S, T* P, i64 n, float scale) {                    \
        attn_softmax<T, true>(S, P, n, scale);                                               \
    }                                                                                        \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS)                               \
        attn_pv_##SUF(const T* P, const T* V, T* O, i64 n, i64 d) {                          \
        __shared__ __align__(16) unsigned ps[ATT_P_WORDS];                                   \
        __shared__ __align__(16) unsigned vt[ATT_VT_WORDS];                                  \
        ATT_FOR_D(attn_pv<T, D>(P, V, O, n, ps, vt));                                        \
    }
RB_ATT(fp16, __half)
RB_ATT(bf16, __nv_bfloat16)
