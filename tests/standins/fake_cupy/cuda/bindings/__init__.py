"""A stand-in for cuda-python's ``cuda.bindings`` (driver and nvrtc), for tests only: the
sm_90a kernels that roofbench builds with NVRTC and launches through the driver (the wgmma GEMM,
the wgmma probe) run through the CPU emulation of tests/standins/cuda_emu instead (shared
libraries in
$RB_EMU_LIBDIR). tests/standins/fake_cupy has no ``cuda/__init__.py``: ``cuda`` stays a namespace
package, so the real ``cuda.pathfinder`` is still found beside this. Never put it on a real GPU
machine's path."""

FAKE = True
