// On-chip bandwidth probes. Header-free (NVRTC and nvcc alike); under the CPU emulation
// (tests/standins/cuda_emu, RB_HOST_EMU) the PTX loads become plain loads.
//
// L2: the working set is `nchunks` chunks of `chunk_vecs` uint4 (16 B); block b reads (or
// copies) chunk b % nchunks, every thread `rows = chunk_vecs / blockDim.x` vectors of it,
// consecutive threads on consecutive 16 B (coalesced), ILP independent loads issued before
// any is used. A chunk (512 KiB by default) is larger than an SM's L1, and the loads skip
// L1 anyway (.cg: L2 only; .nc.L1::no_allocate: the read-only path without allocating), so
// a launch of many blocks over a working set that fits in L2 streams from L2. The grid, not
// a loop, sets the bytes per launch: gridDim.x x chunk_vecs x 16 read (copy: the same again
// written). How gpu-benches' gpu-l2-cache measures it; written anew here.
//   l2_read_<cg|na>_ilp<4|8>(buf, chunk_vecs, nchunks, out, out_all)
//   l2_copy_<cg|na>_ilp<4|8>(src, dst, chunk_vecs, nchunks): dst chunk c = src chunk c
// l2_read keeps its loads live by an XOR of every word: out_all != 0 writes each thread's
// XOR to out[global thread] (the validation launch), else only an impossible match writes.
#ifdef RB_HOST_EMU
#define LD_CG(v, p) ((v) = *(p))
#define LD_NA(v, p) ((v) = *(p))
#else
#define LD_CG(v, p) asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" \
                                 : "=r"((v).x), "=r"((v).y), "=r"((v).z), "=r"((v).w) : "l"(p))
#define LD_NA(v, p) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" \
                                 : "=r"((v).x), "=r"((v).y), "=r"((v).z), "=r"((v).w) : "l"(p))
#endif
#define XOR4(v) ((v).x ^ (v).y ^ (v).z ^ (v).w)
#define L2_NEVER 0x9E3779B9u  // the XOR a launch would have to hit to write in timing mode

template <int CG>
__device__ __forceinline__ uint4 l2_load(const uint4* p) {
    uint4 v;
    if (CG) LD_CG(v, p); else LD_NA(v, p);
    return v;
}

template <int ILP, int CG>
__device__ __forceinline__ void l2_read_body(const uint4* __restrict__ buf, long long chunk_vecs,
                                             int nchunks, unsigned int* __restrict__ out,
                                             int out_all) {
    const int rows = (int)(chunk_vecs / blockDim.x);
    const uint4* p = buf + (long long)(blockIdx.x % nchunks) * chunk_vecs + threadIdx.x;
    const long long step = blockDim.x;
    unsigned int acc = 0;
    int r = 0;
    for (; r + ILP <= rows; r += ILP) {
        uint4 v[ILP];
#pragma unroll
        for (int u = 0; u < ILP; ++u) v[u] = l2_load<CG>(p + (r + u) * step);
#pragma unroll
        for (int u = 0; u < ILP; ++u) acc ^= XOR4(v[u]);
    }
    for (; r < rows; ++r) {
        const uint4 v = l2_load<CG>(p + r * step);
        acc ^= XOR4(v);
    }
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (out_all) out[t] = acc;
    else if (acc == L2_NEVER) out[0] = acc;
}

template <int ILP, int CG>
__device__ __forceinline__ void l2_copy_body(const uint4* __restrict__ src,
                                             uint4* __restrict__ dst, long long chunk_vecs,
                                             int nchunks) {
    const int rows = (int)(chunk_vecs / blockDim.x);
    const long long base = (long long)(blockIdx.x % nchunks) * chunk_vecs + threadIdx.x;
    const long long step = blockDim.x;
    int r = 0;
    for (; r + ILP <= rows; r += ILP) {
        uint4 v[ILP];
#pragma unroll
        for (int u = 0; u < ILP; ++u) v[u] = l2_load<CG>(src + base + (r + u) * step);
        asm volatile("" ::: "memory");  // every load of the trip ahead of its stores
#pragma unroll
        for (int u = 0; u < ILP; ++u) dst[base + (r + u) * step] = v[u];
    }
    for (; r < rows; ++r) dst[base + r * step] = l2_load<CG>(src + base + r * step);
}

#define L2_KERNELS(MODE, CG, ILP)                                                               \
extern "C" __global__ void l2_read_##MODE##_ilp##ILP(const uint4* __restrict__ buf,            \
        long long chunk_vecs, int nchunks, unsigned int* __restrict__ out, int out_all) {      \
    l2_read_body<ILP, CG>(buf, chunk_vecs, nchunks, out, out_all);                             \
}                                                                                              \
extern "C" __global__ void l2_copy_##MODE##_ilp##ILP(const uint4* __restrict__ src,            \
        uint4* __restrict__ dst, long long chunk_vecs, int nchunks) {                          \
    l2_copy_body<ILP, CG>(src, dst, chunk_vecs, nchunks);                                      \
}
L2_KERNELS(cg, 1, 4)
L2_KERNELS(cg, 1, 8)
L2_KERNELS(na, 0, 4)
L2_KERNELS(na, 0, 8)

// smem_read: each block fills SMEM_VECS uint4 of shared memory, then every thread reads 16-byte
// vectors at conflict-free addresses (consecutive threads, consecutive 16 B), `reps` x
// SMEM_UNROLL times. The loads are volatile asm so none is hoisted out of the loop.
// Bytes per launch = gridDim x blockDim x reps x SMEM_UNROLL x 16. Launch with blockDim <= 1024.
#define SMEM_VECS 2048   // 32 KB per block: two or more blocks fit on every SM since sm_70
#define SMEM_UNROLL 16
extern "C" __global__ void smem_read(int reps, unsigned int seed, unsigned int* __restrict__ out) {
    __shared__ uint4 s[SMEM_VECS];
    for (int i = threadIdx.x; i < SMEM_VECS; i += blockDim.x)
        s[i] = make_uint4(seed ^ i, seed + i, seed * i, ~seed ^ i);
    __syncthreads();
#ifndef RB_HOST_EMU
    unsigned int base;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(base) : "l"(s));
#endif
    unsigned int acc = 0;
    // Byte offset of this thread's first vector; a block of up to 1024 threads covers 16 KB and
    // SMEM_UNROLL steps of 1024 B each stay inside the 32 KB buffer (wrapped by the mask).
    const unsigned int off0 = (threadIdx.x * 16u) & (SMEM_VECS * 16u - 1u);
    for (int r = 0; r < reps; ++r) {
        const unsigned int off = (off0 + (unsigned int)r * 512u) & (SMEM_VECS * 16u - 1u);
#pragma unroll
        for (int k = 0; k < SMEM_UNROLL; ++k) {
            uint4 v;
            const unsigned int a = (off + k * 1024u) & (SMEM_VECS * 16u - 1u);
#ifdef RB_HOST_EMU
            v = s[a / 16u];
#else
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(base + a));
#endif
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
