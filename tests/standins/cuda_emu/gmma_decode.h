// Where a wgmma reads an operand element from shared memory: the emulator's reading of the
// PTX ISA, section "Asynchronous Warpgroup Level Matrix Shared Memory Layout" (Matrix
// Descriptor Format, the swizzle atoms of each swizzling mode and major-ness, the strides
// table). Standalone (no CUDA headers): tests/standins/cuda_emu/hopper_emu.h uses it to execute wgmma,
// and the CuTe oracle program (tests/standins/cute_oracle.cpp) checks it against CUTLASS's layouts.
//
// The descriptor: start address, leading (LBO) and stride (SBO) byte offsets, each stored as
// (x & 0x3FFFF) >> 4 in 14 bits at bits 0, 16 and 32; base offset in bits 49-51; swizzling
// mode in bits 62-63 (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
//
// In units of 16-byte chunks ("128-bit elements", T = 16 / element bytes values each), a
// swizzle atom of the W-chunk swizzle (W = 8, 4, 2 for 128, 64, 32 bytes) is 8 rows of W
// chunks, rows W * 16 bytes apart, stored contiguously. K-major: a row holds consecutive k of
// one m (or n); 8 rows are 8 consecutive m; SBO is the stride between 8-row groups; the k
// extent of one wgmma (32 bytes) stays inside the row; LBO is not used. MN-major: a row holds
// W * T consecutive m (or n) of one k; 8 rows are 8 consecutive k; LBO is the stride between
// atoms along m (or n), SBO the stride between groups of 8 k. With no swizzle the atom is one
// chunk wide (8 x 16 bytes, 128 contiguous bytes): K-major LBO steps k by T, SBO m by 8;
// MN-major SBO steps m by T, LBO k by 8. The swizzle permutes the chunks of each 128-byte
// line: address bits 4.. (log2 W bits) XOR the line's bits 7.. within the repeating pattern
// (1024, 512, 256 bytes), whose start the base offset gives when it is not aligned.
#pragma once
#include <cstdint>

struct RbGmmaDesc {
    uint32_t start, lbo, sbo, base_offset, mode;
};

inline RbGmmaDesc rb_gmma_fields(uint64_t desc) {
    RbGmmaDesc d;
    d.start = (uint32_t)(desc & 0x3FFF) << 4;
    d.lbo = (uint32_t)((desc >> 16) & 0x3FFF) << 4;
    d.sbo = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    d.base_offset = (uint32_t)((desc >> 49) & 0x7);
    d.mode = (uint32_t)(desc >> 62);
    return d;
}

// 16-byte chunks per swizzled row: 1 (none), 8 (128 B), 4 (64 B), 2 (32 B).
inline uint32_t rb_gmma_width(uint32_t mode) {
    static const uint32_t w[4] = {1, 8, 4, 2};
    return w[mode & 3];
}

// The swizzle of a mode applied to a shared-memory byte address.
inline uint32_t rb_swizzle(uint32_t addr, uint32_t mode, uint32_t base_offset = 0) {
    const uint32_t w = rb_gmma_width(mode);
    if (w == 1) return addr;
    const uint32_t line = ((addr >> 7) - base_offset) & (w - 1);
    return addr ^ (line << 4);
}

// Byte address of element (mn, k) of an operand: mn is the m (A) or n (B) index, k the
// reduction index, both counted from the descriptor's start. mn_major: the operand is
// M-/N-major (imm-trans = 1), else K-major. Returns false (addr untouched) when (mn, k) is
// outside what the layout can describe (K-major swizzled: k beyond the swizzled row).
inline bool rb_gmma_addr(uint64_t desc, bool mn_major, int elem_bytes, int mn, int k,
                         uint32_t* addr) {
    const RbGmmaDesc d = rb_gmma_fields(desc);
    const int t = 16 / elem_bytes;  // values per 16-byte chunk
    const uint32_t w = rb_gmma_width(d.mode);
    uint32_t off;
    if (!mn_major) {
        if (w == 1) {
            off = (mn % 8) * 16 + (mn / 8) * d.sbo + (k / t) * d.lbo + (k % t) * elem_bytes;
        } else {
            if ((uint32_t)(k / t) >= w) return false;
            off = (mn % 8) * (w * 16) + (mn / 8) * d.sbo + (k / t) * 16 + (k % t) * elem_bytes;
        }
    } else {
        if (w == 1) {
            off = (mn % t) * elem_bytes + (mn / t) * d.sbo + (k % 8) * 16 + (k / 8) * d.lbo;
        } else {
            const int span = (int)w * t;  // values of m/n in one swizzled row
            off = ((mn % span) / t) * 16 + (mn % t) * elem_bytes + (mn / span) * d.lbo +
                  (k % 8) * (w * 16) + (k / 8) * d.sbo;
        }
    }
    *addr = rb_swizzle(d.start + off, d.mode, d.base_offset);
    return true;
}
