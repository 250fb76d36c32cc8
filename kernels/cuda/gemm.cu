// gemm: C[M,N] = A[M,K] B[K,N], all row-major, FP32 accumulation (FP64 for fp64), C stored in
// the input dtype. Sizes need not be multiples of any tile: every load and store is guarded
// (out-of-range operands read as zero), vector loads are used only where aligned.
//   gemm_naive_<dt>    one output per thread, operands straight from global memory.
//   gemm_tiled_<dt>    32x32 shared-memory tiles of A and B; each thread computes 4 outputs.
//   gemm_regblock_<dt> 128x128 block tile, BK = 8, 8x8 outputs per thread held in registers
//                      (2-D register blocking), 4-wide vector loads (float4 in fp32), A stored
//                      transposed in shared memory, double-buffered shared memory with the next
//                      tile prefetched into registers while the current one is computed.
//   gemm_tensor_<dt>   fp16/bf16 (mma.sync m16n8k16) and fp8 e4m3 (mma.sync m16n8k32, sm_89+)
//                      on tensor cores, FP32 accumulate; 128x128 block tile, 8 warps of 64x32,
//                      double-buffered shared memory, register prefetch.
#include "common.cuh"
#include "mma.cuh"

// ---------------------------------------------------------------------------------- naive
template <typename T>
__device__ __forceinline__ void gemm_naive(const T* __restrict__ A, const T* __restrict__ B,
                                           T* __restrict__ C, int M, int N, int K) {
    typedef typename Acc<T>::type Ac;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;  // consecutive threads: B, C coalesced
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    Ac acc = 0;
    for (int k = 0; k < K; ++k) acc += to_acc(A[(i64)row * K + k]) * to_acc(B[(i64)k * N + col]);
    C[(i64)row * N + col] = from_acc<T>(acc);
}

// ---------------------------------------------------------------------------------- tiled
#define TT 32  // tile edge; block = 32 x 8 threads, 4 rows of C per thread
template <typename T>
__device__ __forceinline__ void gemm_tiled(const T* __restrict__ A, const T* __restrict__ B,
                                           T* __restrict__ C, int M, int N, int K) {
    typedef typename Acc<T>::type Ac;
    __shared__ Ac As[TT][TT + 1];
    __shared__ Ac Bs[TT][TT + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col = blockIdx.x * TT + tx, row0 = blockIdx.y * TT;
    Ac acc[4] = {0, 0, 0, 0};
    for (int k0 = 0; k0 < K; k0 += TT) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = ty + 8 * i;
            const int ar = row0 + r, ak = k0 + tx, bk = k0 + r;
            As[r][tx] = (ar < M && ak < K) ? to_acc(A[(i64)ar * K + ak]) : Ac(0);
            Bs[r][tx] = (bk < K && col < N) ? to_acc(B[(i64)bk * N + col]) : Ac(0);
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < TT; ++k) {
            const Ac b = Bs[k][tx];
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[i] += As[ty + 8 * i][k] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = row0 + ty + 8 * i;
        if (r < M && col < N) C[(i64)r * N + col] = from_acc<T>(acc[i]);
    }
}

// ------------------------------------------------------------------------------- regblock
// 4 consecutive values as one load: float4 (LDG.E.128) in fp32, 8/4 bytes for 16/8-bit types,
// two 16-byte loads in fp64.
template <typename T> struct Four { T v[4]; };
template <typename T>
__device__ __forceinline__ void ld4(const T* p, typename Acc<T>::type (&f)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) f[i] = to_acc(p[i]);
}
template <> __device__ __forceinline__ void ld4<float>(const float* p, float (&f)[4]) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    f[0] = v.x; f[1] = v.y; f[2] = v.z; f[3] = v.w;
}
template <> __device__ __forceinline__ void ld4<double>(const double* p, double (&f)[4]) {
    const double2 v0 = reinterpret_cast<const double2*>(p)[0];
    const double2 v1 = reinterpret_cast<const double2*>(p)[1];
    f[0] = v0.x; f[1] = v0.y; f[2] = v1.x; f[3] = v1.y;
}
template <> __device__ __forceinline__ void ld4<__half>(const __half* p, float (&f)[4]) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
    f[0] = a.x; f[1] = a.y; f[2] = b.x; f[3] = b.y;
}
template <>
__device__ __forceinline__ void ld4<__nv_bfloat16>(const __nv_bfloat16* p, float (&f)[4]) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    f[0] = a.x; f[1] = a.y; f[2] = b.x; f[3] = b.y;
}

// Guarded load of 4 consecutive values [j, j+4) of a row of length n: vector when aligned and
// fully inside, else element by element with zero fill.
template <typename T>
__device__ __forceinline__ void ld4_guard(const T* row, int j, int n, bool row_ok, bool vec_ok,
                                          typename Acc<T>::type (&f)[4]) {
    typedef typename Acc<T>::type Ac;
    if (row_ok && vec_ok && j + 4 <= n) {
        ld4(row + j, f);
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) f[i] = (row_ok && j + i < n) ? to_acc(row[j + i]) : Ac(0);
    }
}

#define RB_BM 128
#define RB_BN 128
#define RB_BK 8
template <typename T>
__device__ __forceinline__ void gemm_regblock(const T* __restrict__ A, const T* __restrict__ B,
                                              T* __restrict__ C, int M, int N, int K) {
    typedef typename Acc<T>::type Ac;
    __shared__ __align__(16) Ac As[2][RB_BK][RB_BM];  // A transposed: As[k][m]
    __shared__ __align__(16) Ac Bs[2][RB_BK][RB_BN];
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * RB_BM, n0 = blockIdx.x * RB_BN;
    // Global -> shared mapping: A: row tid/2, k (tid%2)*4; B: k tid/32, n (tid%32)*4.
    const int a_r = tid >> 1, a_k = (tid & 1) * 4;
    const int b_k = tid >> 5, b_n = (tid & 31) * 4;
    const bool a_vec = (K % 4) == 0, b_vec = (N % 4) == 0;
    const T* a_row = A + (i64)(m0 + a_r) * K;
    const bool a_row_ok = m0 + a_r < M;
    // Compute mapping: 16 x 16 threads, each 2x2 sub-blocks of 4x4 outputs (rows ty*4 and
    // 64 + ty*4, cols tx*4 and 64 + tx*4) so shared-memory vector reads are conflict-free.
    const int tx = tid & 15, ty = tid >> 4;
    Ac acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0;

    Ac pa[4], pb[4];  // prefetch registers
    auto fetch = [&](int k0) {
        ld4_guard(a_row, k0 + a_k, K, a_row_ok, a_vec, pa);
        const int kb = k0 + b_k;
        ld4_guard(B + (i64)kb * N, n0 + b_n, N, kb < K, b_vec, pb);
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 4; ++i) As[buf][a_k + i][a_r] = pa[i];
#pragma unroll
        for (int i = 0; i < 4; ++i) Bs[buf][b_k][b_n + i] = pb[i];
    };
    fetch(0);
    stash(0);
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += RB_BK) {
        const bool more = k0 + RB_BK < K;
        if (more) fetch(k0 + RB_BK);  // global loads in flight during the FMAs below
#pragma unroll
        for (int k = 0; k < RB_BK; ++k) {
            Ac a[8], b[8];
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    a[h * 4 + i] = As[buf][k][h * 64 + ty * 4 + i];
                    b[h * 4 + i] = Bs[buf][k][h * 64 + tx * 4 + i];
                }
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
        if (more) stash(buf ^ 1);  // the other buffer: nobody reads it this iteration
        __syncthreads();
        buf ^= 1;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = m0 + (i >> 2) * 64 + ty * 4 + (i & 3);
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int c = n0 + (j >> 2) * 64 + tx * 4 + (j & 3);
            if (c < N) C[(i64)r * N + c] = from_acc<T>(acc[i][j]);
        }
    }
}

// --------------------------------------------------------------------------------- tensor
// Shared-memory layout: As[m][k] and Bs[n][k] (B transposed while it is stored), both with k
// contiguous, 64 bytes of k per tile row plus 16 bytes of padding (row stride 20 words: the
// fragment reads of 8 rows x 4 words hit 32 distinct banks). With k contiguous, one 32-bit
// word holds the 2 (fp16/bf16) or 4 (fp8) consecutive-k values an mma fragment register needs,
// so fp16, bf16 and fp8 share one kernel: only the instruction and the K per mma differ.
#define TC_BM 128
#define TC_BN 128
#define TC_ROWW 20  // words per smem row: 16 (64 bytes of k) + 4 padding

// Raw bytes of `BYTES` consecutive storage values, loaded as one vector when allowed.
template <int BYTES> struct RawVec;
template <> struct RawVec<16> { typedef uint4 type; };
template <> struct RawVec<8> { typedef uint2 type; };
template <typename T, int BYTES> struct Chunk {
    static constexpr int N = BYTES / sizeof(T);
    union {
        typename RawVec<BYTES>::type u;
        T v[N];
        unsigned w[BYTES / 4];
    };
    __device__ __forceinline__ Chunk() {}
};
template <typename T, int BYTES>
__device__ __forceinline__ void ld_chunk(Chunk<T, BYTES>& c, const T* row, int j, int n,
                                         bool row_ok, bool vec_ok) {
    if (row_ok && vec_ok && j + Chunk<T, BYTES>::N <= n) {
        c.u = *reinterpret_cast<const typename RawVec<BYTES>::type*>(row + j);
    } else {
#pragma unroll
        for (int i = 0; i < BYTES / 4; ++i) c.w[i] = 0u;
#pragma unroll
        for (int i = 0; i < Chunk<T, BYTES>::N; ++i)
            if (row_ok && j + i < n) c.v[i] = row[j + i];
    }
}

template <typename T>
__device__ __forceinline__ void gemm_tensor(const T* __restrict__ A, const T* __restrict__ B,
                                            T* __restrict__ C, int M, int N, int K) {
    constexpr int E = sizeof(T);      // bytes per value
    constexpr int P = 4 / E;          // values per 32-bit word (2 or 4)
    constexpr int BK = 64 / E;        // k per tile: 64 bytes (32 fp16 or 64 fp8)
    constexpr int AV = 16 / E;        // values per 16-byte A chunk
    constexpr int BW = 32 / P;        // bytes of one B row chunk: 8 values (16 B fp16, 8 B fp8)
    __shared__ __align__(16) unsigned As[2][TC_BM * TC_ROWW];
    __shared__ __align__(16) unsigned Bs[2][TC_BN * TC_ROWW];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm = warp >> 2, wn = warp & 3;  // warp tile: rows wm*64, cols wn*32
    const int m0 = blockIdx.y * TC_BM, n0 = blockIdx.x * TC_BN;

    // A: 512 chunks of 16 B (row c/4, k chunk c%4), two per thread.
    // B: each thread takes P consecutive k rows x 8 columns and writes P-value words of
    //    Bs[n][k]: kg = tid % 16 (k group of P rows), ng = tid / 16 (8 columns).
    const bool a_vec = (K % AV) == 0, b_vec = (N % 8) == 0;
    const int kg = tid & 15, ng = tid >> 4;
    Chunk<T, 16> pa[2];
    Chunk<T, BW> pb[P];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int c = tid + i * 256, r = c >> 2, kc = (c & 3) * AV;
            ld_chunk(pa[i], A + (i64)(m0 + r) * K, k0 + kc, K, m0 + r < M, a_vec);
        }
#pragma unroll
        for (int p = 0; p < P; ++p) {
            const int k = k0 + kg * P + p;
            ld_chunk(pb[p], B + (i64)k * N, n0 + ng * 8, N, k < K, b_vec);
        }
    };
    auto stash = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int c = tid + i * 256, r = c >> 2, kc = c & 3;
            *reinterpret_cast<uint4*>(&As[buf][r * TC_ROWW + kc * 4]) = pa[i].u;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {  // word = the P k-values of column ng*8+j
            union { unsigned w; T v[P]; } word;
#pragma unroll
            for (int p = 0; p < P; ++p) word.v[p] = pb[p].v[j];
            Bs[buf][(ng * 8 + j) * TC_ROWW + kg] = word.w;
        }
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

    fetch(0);
    stash(0);
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) fetch(k0 + BK);
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {  // two mma K-steps of 32 bytes per tile
            unsigned af[4][4], bf[4][2];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
                const unsigned* base = &As[buf][(wm * 64 + mi * 16 + g) * TC_ROWW + ks * 8 + t];
                af[mi][0] = base[0];
                af[mi][1] = base[8 * TC_ROWW];
                af[mi][2] = base[4];
                af[mi][3] = base[8 * TC_ROWW + 4];
            }
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                const unsigned* base = &Bs[buf][(wn * 32 + ni * 8 + g) * TC_ROWW + ks * 8 + t];
                bf[ni][0] = base[0];
                bf[ni][1] = base[4];
            }
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) Mma<T>::run(acc[mi][ni], af[mi], bf[ni]);
        }
        if (more) stash(buf ^ 1);
        __syncthreads();
        buf ^= 1;
    }
    // C fragment: d0,d1 at (g, 2t..2t+1), d2,d3 at (g+8, 2t..2t+1).
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int row = m0 + wm * 64 + mi * 16 + g + (r >> 1) * 8;
                const int col = n0 + wn * 32 + ni * 8 + 2 * t + (r & 1);
                if (row < M && col < N) C[(i64)row * N + col] = from_acc<T>(acc[mi][ni][r]);
            }
}

#define RB_GEMM(SUF, T)                                                                      \
    extern "C" __global__ void gemm_naive_##SUF(const T* A, const T* B, T* C, i64 M, i64 N,  \
                                                i64 K) {                                     \
        gemm_naive<T>(A, B, C, (int)M, (int)N, (int)K);                                      \
    }                                                                                        \
    extern "C" __global__ void gemm_tiled_##SUF(const T* A, const T* B, T* C, i64 M, i64 N,  \
                                                i64 K) {                                     \
        gemm_tiled<T>(A, B, C, (int)M, (int)N, (int)K);                                      \
    }                                                                                        \
    extern "C" __global__ void __launch_bounds__(256)                                        \
        gemm_regblock_##SUF(const T* A, const T* B, T* C, i64 M, i64 N, i64 K) {             \
        gemm_regblock<T>(A, B, C, (int)M, (int)N, (int)K);                                   \
    }
RB_FOR_ALL_DTYPES(RB_GEMM)

#define RB_GEMM_TC(SUF, T)                                                                   \
    extern "C" __global__ void __launch_bounds__(256)                                        \
        gemm_tensor_##SUF(const T* A, const T* B, T* C, i64 M, i64 N, i64 K) {               \
        gemm_tensor<T>(A, B, C, (int)M, (int)N, (int)K);                                     \
    }
RB_GEMM_TC(fp16, __half)
RB_GEMM_TC(bf16, __nv_bfloat16)
RB_GEMM_TC(fp8, fp8_t)
