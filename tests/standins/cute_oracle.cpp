// The independent oracle for the wgmma shared-memory layouts: CUTLASS's CuTe (the
// nvidia-cutlass headers) computes, on the host, the byte address of every element of a
// GMMA operand tile (its K-major / MN-major SW32/SW64/SW128/interleaved layout atoms) and the
// descriptor make_gmma_desc builds for it. This program compares them with
//   * the emulator's decode (tests/standins/cuda_emu/gmma_decode.h: rb_gmma_addr) of CuTe's
//     descriptors, for every element of every k step, every atom and element size;
//   * the descriptors the GEMM kernel builds and the emulator's decode of them, for every
//     (m, k) of A and (n, k) of B of a stage, and where the kernel's writers put those
//     elements (TMA's boxes, the fp8 transpose of wgmma_layout.cuh). The descriptors come
//     from rb_kernel_descs, linked in from a file the test generates out of the kernel's own
//     source: the statements of gemm_wgmma.cu that compute the stage addresses and the
//     descriptors, compiled against the kernel's headers (hopper_ops.cuh: gmma_desc). So a
//     change to the kernel's descriptor code is what this program checks.
// Output: one line per check, "name checked mismatches [first mismatch]". Argument: a planted
// error applied to the kernel's descriptors (none, swap_lbo_sbo, swizzle64, swizzle32).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// Host stand-in for the shared window: CuTe turns pointers into shared addresses with
// __cvta_generic_to_shared; here they are offsets from a 1024-aligned buffer.
static uintptr_t g_smem_base;
static inline uint32_t __cvta_generic_to_shared(const void* p) {
    return (uint32_t)((uintptr_t)p - g_smem_base);
}
#define CUTE_CVTA_GENERIC_TO_SHARED_ACTIVATED 1
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

#include "gmma_decode.h"

// The kernel's headers, built for the host (plain integer code; uint4 comes with CuTe's CUDA
// headers, the transpose's byte permutes are not run here).
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
static inline unsigned __byte_perm(unsigned, unsigned, unsigned) { return 0; }
#include "hopper_ops.cuh"
#include "wgmma_layout.cuh"

// The kernel's descriptors of k step kk of stage s (shared base `base`), consumer warpgroup cw
// (A), for elements of `elem` bytes: the generated file of the kernel's statements.
extern "C" void rb_kernel_descs(int elem, unsigned base, int s, int cw, int kk,
                                unsigned long long* da, unsigned long long* db);

using namespace cute;
namespace G = cute::SM90::GMMA;

static unsigned char* g_buf;

struct Check {
    std::string name;
    long checked = 0, bad = 0;
    std::string first;
    void see(bool ok, const char* what, int a, int b, long want, long got) {
        ++checked;
        if (ok) return;
        if (bad++ == 0) {
            char s[200];
            snprintf(s, sizeof s, "%s(%d,%d): cute %ld emulator %ld", what, a, b, want, got);
            first = s;
        }
    }
    void see_desc(int a, int b, uint64_t want, uint64_t got) {
        ++checked;
        if (want == got || bad++) return;
        char s[200];
        snprintf(s, sizeof s, "desc(%d,%d): cute 0x%016llx kernel 0x%016llx", a, b,
                 (unsigned long long)want, (unsigned long long)got);
        first = s;
    }
    void print() const {
        printf("%s %ld %ld %s\n", name.c_str(), checked, bad, first.c_str());
    }
};

template <class T>
static long offset_of(T* p) {
    return (long)((unsigned char*)p - g_buf);
}

// Every element of every k step of a [MN][K] tile laid out with `atom`, CuTe's descriptor of
// each step decoded by the emulator.
template <class T, G::Major MAJOR, class Atom, class Order>
static void atom_check(const char* name, Atom atom, Order order) {
    constexpr int MN = 256;
    constexpr int KS = 32 / sizeof(T);    // one wgmma k step: 32 bytes
    constexpr int KT = 128 / sizeof(T);   // a stage: 128 bytes of k
    auto layout = tile_to_shape(atom, make_shape(Int<MN>{}, Int<KT>{}), order);
    Tensor t = make_tensor(make_smem_ptr((T*)g_buf), layout);
    Check c;
    c.name = name;
    for (int kk = 0; kk < KT / KS; ++kk) {
        Tensor s = local_tile(t, make_shape(Int<MN>{}, Int<KS>{}), make_coord(0, kk));
        const uint64_t desc = G::make_gmma_desc<MAJOR>(s).desc_;
        for (int mn = 0; mn < MN; ++mn)
            for (int k = 0; k < KS; ++k) {
                uint32_t got = 0xFFFFFFFF;
                const bool ok = rb_gmma_addr(desc, MAJOR == G::Major::MN, sizeof(T), mn, k, &got);
                const long want = offset_of(raw_pointer_cast(&s(mn, k)));
                c.see(ok && want == (long)got, "elem", mn, k, want, (long)got);
            }
    }
    c.print();
}

static uint64_t plant(uint64_t desc, const std::string& how) {
    if (how == "swap_lbo_sbo") {
        const uint64_t lbo = (desc >> 16) & 0x3FFF, sbo = (desc >> 32) & 0x3FFF;
        desc &= ~((0x3FFFull << 16) | (0x3FFFull << 32));
        return desc | (sbo << 16) | (lbo << 32);
    }
    if (how == "swizzle64") return (desc & ~(3ull << 62)) | (2ull << 62);
    if (how == "swizzle32") return (desc & ~(3ull << 62)) | (3ull << 62);
    return desc;
}

// The kernel's decode of descriptor `got` (MN- or K-major) against CuTe's offsets of the
// tile `s` of one k step kk (rows x ks): every element, its row reported as row0 + r.
template <class S>
static void see_decode(Check& c, const char* what, S& s, uint64_t got, bool mn, long e,
                       int rows, int ks, int row0, int kk) {
    for (int r = 0; r < rows; ++r)
        for (int k = 0; k < ks; ++k) {
            uint32_t a = 0;
            const bool ok = rb_gmma_addr(got, mn, e, r, k, &a);
            const long w = offset_of(raw_pointer_cast(&s(r, k)));
            c.see(ok && w == (long)a, what, row0 + r, kk * ks + k, w, (long)a);
        }
}

// The kernel's B descriptors of the four k steps of the stage's B tile `tb` against CuTe's,
// and their decode: K-major (fp8, the producer's transpose) or MN-major (the TMA boxes).
template <G::Major MAJOR, class T, class TB>
static void see_b_descs(Check& db, Check& eb, TB& tb, unsigned stage, long e,
                        const std::string& how) {
    constexpr int KS = 32 / sizeof(T);
    for (int kk = 0; kk < 4; ++kk) {
        Tensor s = local_tile(tb, make_shape(Int<WG_BN>{}, Int<KS>{}), make_coord(0, kk));
        const uint64_t want = G::make_gmma_desc<MAJOR>(s).desc_;
        unsigned long long ka = 0, kb = 0;
        rb_kernel_descs(sizeof(T), 0, stage, 0, kk, &ka, &kb);
        const uint64_t got = plant(kb, how);
        db.see_desc(0, kk, want, got);
        see_decode(eb, "B", s, got, MAJOR == G::Major::MN, e, WG_BN, KS, 0, kk);
    }
}

// The GEMM's stage: A [128 m][BK] K-major SW128; B [256 n][BK] MN-major SW128 (16-bit,
// four TMA boxes [BK k][64 n] 8 KiB apart) or K-major SW128 (fp8, the producer's transpose).
template <class T>
static void kernel_check(const char* dt, const std::string& how) {
    constexpr bool FP8 = sizeof(T) == 1;
    constexpr int BK = WG_BK_BYTES / sizeof(T), KS = 32 / sizeof(T);
    const unsigned stage = 1;  // any stage: its base is a multiple of 1024
    const unsigned base = stage * WG_STAGE_BYTES;
    const long e = sizeof(T);

    auto la = tile_to_shape(G::Layout_K_SW128_Atom<T>{}, make_shape(Int<WG_BM>{}, Int<BK>{}));
    Tensor ta = make_tensor(make_smem_ptr((T*)(g_buf + base)), la);
    Check da, ea, wa;
    da.name = std::string("kernel_desc_A_") + dt;
    ea.name = std::string("kernel_decode_A_") + dt;
    wa.name = std::string("tma_box_A_") + dt;
    for (int cw = 0; cw < 2; ++cw)
        for (int kk = 0; kk < 4; ++kk) {
            Tensor s = local_tile(ta, make_shape(Int<64>{}, Int<KS>{}), make_coord(cw, kk));
            const uint64_t want = G::make_gmma_desc<G::Major::K>(s).desc_;
            unsigned long long ka = 0, kb = 0;
            rb_kernel_descs(sizeof(T), 0, stage, cw, kk, &ka, &kb);
            const uint64_t got = plant(ka, how);
            da.see_desc(cw, kk, want, got);
            see_decode(ea, "A", s, got, false, e, 64, KS, cw * 64, kk);
        }
    // TMA lands box row m (k innermost, 128 bytes) at m * 128, swizzled by address.
    for (int m = 0; m < WG_BM; ++m)
        for (int k = 0; k < BK; ++k) {
            const long w = offset_of(raw_pointer_cast(&ta(m, k)));
            const long got = rb_swizzle(base + m * 128 + k * e, 1);
            wa.see(w == got, "A", m, k, w, got);
        }
    da.print();
    ea.print();
    wa.print();

    Check db, eb, wb;
    db.name = std::string("kernel_desc_B_") + dt;
    eb.name = std::string("kernel_decode_B_") + dt;
    wb.name = std::string(FP8 ? "transpose_B_" : "tma_box_B_") + dt;
    const unsigned sb = base + WG_A_BYTES;
    if constexpr (FP8) {
        auto lb = tile_to_shape(G::Layout_K_SW128_Atom<T>{}, make_shape(Int<WG_BN>{}, Int<BK>{}));
        Tensor tb = make_tensor(make_smem_ptr((T*)(g_buf + sb)), lb);
        see_b_descs<G::Major::K, T>(db, eb, tb, stage, e, how);
        // The producer's transpose: thread t's store s of k chunk kc holds row n, chunk kc.
        for (int t = 0; t < 128; ++t)
            for (int kc = t >> 6; kc < 8; kc += 2)
                for (int st = 0; st < 4; ++st) {
                    const int n = 4 * (t & 63) + fp8_store_quad(t, st);
                    for (int b = 0; b < 16; ++b) {
                        const long w = offset_of(raw_pointer_cast(&tb(n, kc * 16 + b)));
                        const long got = sb + fp8_store_offset(t, kc, st) + b;
                        wb.see(w == got, "B", n, kc * 16 + b, w, got);
                    }
                }
    } else {
        // 64-column atoms along n BK*128 bytes apart (k first): the kernel's 4 TMA boxes.
        auto lb = tile_to_shape(G::Layout_MN_SW128_Atom<T>{}, make_shape(Int<WG_BN>{}, Int<BK>{}),
                                Step<_2, _1>{});
        Tensor tb = make_tensor(make_smem_ptr((T*)(g_buf + sb)), lb);
        see_b_descs<G::Major::MN, T>(db, eb, tb, stage, e, how);
        // TMA box j = columns 64j..64j+63: row k (n innermost, 128 bytes) at k * 128.
        for (int n = 0; n < WG_BN; ++n)
            for (int k = 0; k < BK; ++k) {
                const long w = offset_of(raw_pointer_cast(&tb(n, k)));
                const long got = rb_swizzle(sb + (n / 64) * (BK * 128) + k * 128 + (n % 64) * e, 1);
                wb.see(w == got, "B", n, k, w, got);
            }
    }
    db.print();
    eb.print();
    wb.print();
}

int main(int argc, char** argv) {
    const std::string how = argc > 1 ? argv[1] : "none";
    g_buf = (unsigned char*)aligned_alloc(1024, 1 << 20);
    g_smem_base = (uintptr_t)g_buf;
    using H = cute::half_t;
    using F8 = cute::float_e4m3_t;
    if (how == "none") {
        atom_check<H, G::Major::K>("atom_K_SW128_f16", G::Layout_K_SW128_Atom<H>{}, GenColMajor{});
        atom_check<H, G::Major::K>("atom_K_SW64_f16", G::Layout_K_SW64_Atom<H>{}, GenColMajor{});
        atom_check<H, G::Major::K>("atom_K_SW32_f16", G::Layout_K_SW32_Atom<H>{}, GenColMajor{});
        atom_check<H, G::Major::K>("atom_K_INTER_f16", G::Layout_K_INTER_Atom<H>{}, GenColMajor{});
        atom_check<H, G::Major::K>("atom_K_SW128_f16_kfirst", G::Layout_K_SW128_Atom<H>{},
                                   GenRowMajor{});
        atom_check<F8, G::Major::K>("atom_K_SW128_e4m3", G::Layout_K_SW128_Atom<F8>{}, GenColMajor{});
        atom_check<F8, G::Major::K>("atom_K_SW64_e4m3", G::Layout_K_SW64_Atom<F8>{}, GenColMajor{});
        atom_check<F8, G::Major::K>("atom_K_SW32_e4m3", G::Layout_K_SW32_Atom<F8>{}, GenColMajor{});
        atom_check<H, G::Major::MN>("atom_MN_SW128_f16", G::Layout_MN_SW128_Atom<H>{},
                                    GenColMajor{});
        atom_check<H, G::Major::MN>("atom_MN_SW64_f16", G::Layout_MN_SW64_Atom<H>{}, GenColMajor{});
        atom_check<H, G::Major::MN>("atom_MN_SW32_f16", G::Layout_MN_SW32_Atom<H>{}, GenColMajor{});
        atom_check<H, G::Major::MN>("atom_MN_INTER_f16", G::Layout_MN_INTER_Atom<H>{},
                                    GenColMajor{});
        atom_check<H, G::Major::MN>("atom_MN_SW128_f16_kfirst", G::Layout_MN_SW128_Atom<H>{},
                                    GenRowMajor{});
    }
    kernel_check<H>("fp16", how);
    kernel_check<cute::bfloat16_t>("bf16", how);
    kernel_check<F8>("fp8", how);
    return 0;
}
