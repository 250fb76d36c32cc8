// On-chip bandwidth probes. Header-free (NVRTC and nvcc alike).
//
// l2_read: every thread reads 16-byte vectors of a working set of nv uint4 with ld.global.cg
// (cache in L2 only, bypassing L1), `reps` times over. With the working set inside L2 the rate
// is the L2 bandwidth; sweeping it past the L2 size shows the knee down to HBM.
// Bytes per launch = reps x nv x 16. The XOR of all loaded words is written once per thread so
// no load is dead.
#define LDCG(v, p) asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" \
                              : "=r"((v).x), "=r"((v).y), "=r"((v).z), "=r"((v).w) : "l"(p))
#define XOR4(v) ((v).x ^ (v).y ^ (v).z ^ (v).w)

extern "C" __global__ void l2_read(const uint4* __restrict__ buf, long long nv, int reps,
                                   unsigned int* __restrict__ out) {
    unsigned int acc = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long t0 = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = 0; r < reps; ++r) {
        long long i = t0;
        // Four independent 16-byte loads issued before any result is used: several requests
        // in flight per thread, so the sweep measures L2 bandwidth rather than its latency.
        for (; i + 3 * stride < nv; i += 4 * stride) {
            uint4 v0, v1, v2, v3;
            LDCG(v0, buf + i);
            LDCG(v1, buf + i + stride);
            LDCG(v2, buf + i + 2 * stride);
            LDCG(v3, buf + i + 3 * stride);
            acc ^= XOR4(v0) ^ XOR4(v1) ^ XOR4(v2) ^ XOR4(v3);
        }
        for (; i < nv; i += stride) {
            uint4 v;
            LDCG(v, buf + i);
            acc ^= XOR4(v);
        }
    }
    out[t0] = acc;
}

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
    unsigned int base;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(base) : "l"(s));
    unsigned int acc = 0;
    // Byte offset of this thread's first vector; a block of up to 1024 threads covers 16 KB and
    // SMEM_UNROLL steps of 1024 B each stay inside the 32 KB buffer (wrapped by the mask).
    const unsigned int off0 = (threadIdx.x * 16u) & (SMEM_VECS * 16u - 1u);
    for (int r = 0; r < reps; ++r) {
        const unsigned int off = (off0 + (unsigned int)r * 512u) & (SMEM_VECS * 16u - 1u);
#pragma unroll
        for (int k = 0; k < SMEM_UNROLL; ++k) {
            uint4 v;
            const unsigned int a = base + ((off + k * 1024u) & (SMEM_VECS * 16u - 1u));
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
