// The emulator's global-memory byte counters (the model-versus-counters check of `--ncu`,
// without a GPU). The kernel source and the emulation are compiled with GCC's outline
// AddressSanitizer instrumentation (-fsanitize=kernel-address,
// asan-instrumentation-with-call-threshold=0, no runtime library): every load and store the
// compiled code executes (vector loads, inlined fixed-width copies and atomics included) calls
// one of the __asan_{load,store}<N>_noabort callbacks below with its address and width. This file is
// compiled WITHOUT the instrumentation and linked into the same shared library.
//
// Only accesses that fall inside a watched range count: the host registers each global buffer
// of a launch (rb_bytes_watch), so shared memory, the stack and the emulator's own state never
// count. A store counts as written bytes, a load as read bytes, an atomic read-modify-write as
// both. An access of 2, 4, 8 or 16 bytes whose address is not a multiple of its width is also
// counted as misaligned: the GPU faults on it (a vector load on an unaligned row), x86 does not. The TMA of hopper_emu.h copies with a run-time width, which the instrumentation does
// not see: it reports its reads through rb_bytes_access (emu.h: rb_count_global); zero-filled
// out-of-bounds box elements read nothing.
//
// Every access is first handed to the emulation's check (checks.h rb_emu_check_access, in the
// same library): one misaligned to its width inside a buffer the host registered fails the
// launch there, naming the kernel, the buffer and the element, before the access is made (a
// misaligned 16-byte access is an x86 movdqa fault: a segfault of the test process).
#include <atomic>
#include <cstddef>
#include <cstdint>

extern "C" void rb_emu_check_access(const void* p, unsigned long long n, int store)
    __attribute__((weak));

namespace {
constexpr int kMaxRanges = 32;
struct Range {
    std::atomic<uintptr_t> lo{0}, hi{0};
    std::atomic<unsigned long long> read{0}, written{0}, loads{0}, stores{0}, misaligned{0};
};
Range ranges[kMaxRanges];
std::atomic<int> nranges{0};

inline void count(const void* p, size_t n, bool store) {
    if (rb_emu_check_access) rb_emu_check_access(p, n, store);  // may not return (a fault)
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    const int nr = nranges.load(std::memory_order_relaxed);
    for (int i = 0; i < nr; ++i) {
        Range& r = ranges[i];
        const uintptr_t lo = r.lo.load(std::memory_order_relaxed);
        const uintptr_t hi = r.hi.load(std::memory_order_relaxed);
        if (a + n <= lo || a >= hi) continue;
        const uintptr_t b = a < lo ? lo : a, e = a + n > hi ? hi : a + n;
        if ((n == 2 || n == 4 || n == 8 || n == 16) && a % n != 0)
            r.misaligned.fetch_add(1, std::memory_order_relaxed);
        if (store) {
            r.written.fetch_add(e - b, std::memory_order_relaxed);
            r.stores.fetch_add(1, std::memory_order_relaxed);
        } else {
            r.read.fetch_add(e - b, std::memory_order_relaxed);
            r.loads.fetch_add(1, std::memory_order_relaxed);
        }
    }
}
}  // namespace

extern "C" {
#define RB_ACCESS(N)                                                      \
    void __asan_load##N##_noabort(void* p) { count(p, N, false); }        \
    void __asan_store##N##_noabort(void* p) { count(p, N, true); }        \
    void __asan_load##N(void* p) { count(p, N, false); }                  \
    void __asan_store##N(void* p) { count(p, N, true); }
RB_ACCESS(1)
RB_ACCESS(2)
RB_ACCESS(4)
RB_ACCESS(8)
RB_ACCESS(16)
#undef RB_ACCESS
void __asan_loadN_noabort(void* p, long n) { count(p, (size_t)n, false); }
void __asan_storeN_noabort(void* p, long n) { count(p, (size_t)n, true); }
void __asan_loadN(void* p, long n) { count(p, (size_t)n, false); }
void __asan_storeN(void* p, long n) { count(p, (size_t)n, true); }
// What else the instrumented code may call (no runtime library): nothing to do here.
void __asan_handle_no_return() {}
void __asan_before_dynamic_init(const char*) {}
void __asan_after_dynamic_init() {}
void __asan_register_globals(void*, long) {}
void __asan_unregister_globals(void*, long) {}

// The emulation's explicit hook (emu.h: rb_count_global), for the TMA's copies.
void rb_bytes_access(const void* p, unsigned long long n, int store) { count(p, n, store); }

// The host's interface (cuda_tools.ByteCounter): watch up to 32 ranges, clear the counts
// before a launch, read them after it.
int rb_bytes_watch(const void* p, unsigned long long nbytes) {
    const int i = nranges.load();
    if (i >= kMaxRanges) return -1;
    ranges[i].lo = reinterpret_cast<uintptr_t>(p);
    ranges[i].hi = reinterpret_cast<uintptr_t>(p) + nbytes;
    ranges[i].read = ranges[i].written = ranges[i].loads = ranges[i].stores = 0;
    ranges[i].misaligned = 0;
    nranges = i + 1;
    return i;
}
void rb_bytes_unwatch_all() { nranges = 0; }
void rb_bytes_clear() {
    for (auto& r : ranges) r.read = r.written = r.loads = r.stores = r.misaligned = 0;
}
// out[5 i .. 5 i + 4]: bytes read, bytes written, loads, stores, misaligned accesses of range i.
int rb_bytes_get(unsigned long long* out, int n) {
    const int nr = nranges.load();
    for (int i = 0; i < nr && i < n; ++i) {
        out[5 * i] = ranges[i].read;
        out[5 * i + 1] = ranges[i].written;
        out[5 * i + 2] = ranges[i].loads;
        out[5 * i + 3] = ranges[i].stores;
        out[5 * i + 4] = ranges[i].misaligned;
    }
    return nr;
}
}
