"""A stand-in for PyCUDA, for tests only (see ../cupy): host memory, kernels through the CPU
emulation of tests/standins/cuda_emu. It implements only what roofbench's PyCUDA backend calls."""

VERSION_TEXT = "0.0-fake-emulated"
FAKE = True
