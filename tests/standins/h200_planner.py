"""The CUDA backend's planning and case selection on an H200, with no device: what the tests
that ask which cases and launches `make bench` would run there use."""

from __future__ import annotations

from roofbench.bench.backends.gpu_common import ALL_LAUNCHERS, CudaCBackend, plan_launches
from roofbench.kernels.cuda_impl import DeviceProps

GiB = 1 << 30


class H200Planner(CudaCBackend):
    """Plans (tensor-map kernels allowed: the CuPy backend launches them) and selects; it
    cannot prepare, time or measure."""

    name = "cuda"
    props = DeviceProps(cc=(9, 0), sm_count=132, l2_bytes=60 << 20, name="NVIDIA H200")

    def plan(self, case):
        return plan_launches(case, self.props, launchers=ALL_LAUNCHERS)

    def info(self):
        return {}

    def memory_budget(self) -> int:
        return (140 * GiB) // 2  # free // 2, as CupyBackend

    def prepare(self, case, inputs):
        raise NotImplementedError

    def time(self, fn, cfg):
        raise NotImplementedError

    def measure_roofs(self, quick=False, progress=None, checkpoint=None):
        raise NotImplementedError
