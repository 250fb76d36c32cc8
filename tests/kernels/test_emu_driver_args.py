"""Kernel arguments as the driver reads them, on the driver-API path (issue 58 item 5): the
sm_90a kernels launch through cuLaunchKernel with a ``void*[]`` of argument slots
(roofs/probes/cuda_driver.py KernelParams, bench/backends/tma_launch.py param_bytes), and
the driver reads each parameter's width from the compiled image, whatever the slot holds: a
4-byte int in the slot of a ``long long`` hands the kernel 4 bytes of garbage. roofbench's
DriverFunction asks the driver for the parameters' sizes (cuFuncGetParamInfo) and refuses a
launch whose slots differ; here the stand-in driver answers from the emulated build's
compiled parameter types (emu.h rb_signature), so the check meets the real kernel's layout.
The CuPy / PyCUDA stand-ins and the test launcher check width and kind (test_emu_work.py);
the driver's answer has sizes only, so this path checks widths."""

from __future__ import annotations

import types
from typing import Any

import cuda_tools as ct
import numpy as np
import pytest
from emu_run import fake_bindings, poisoned
from roofbench.bench.backends import tma_launch
from roofbench.bench.backends.gpu_common import ALL_LAUNCHERS, PlannedLaunch, plan_launches
from roofbench.kernels.cuda_impl import DeviceProps
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case
from roofbench.roofs.probes import cuda_driver as cd

pytestmark = ct.needs_emulation()

H200 = DeviceProps(cc=(9, 0), sm_count=132, name="emulated H200")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The stand-in driver over the emulated build of the wgmma GEMM, made the driver of
    roofbench's launch code for this module."""
    drv, nvrtc = fake_bindings()
    libdir = tmp_path_factory.mktemp("driver_args")
    ct.build_driver_source(ct.driver_sources()["gemm_wgmma"], libdir)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cd, "driver_module", lambda: drv)
        mp.setattr(tma_launch, "driver_module", lambda: drv)
        drv.reset()
        drv.LIBDIR = str(libdir)
        module = cd.check(drv.cuModuleLoadData(nvrtc.cubin_for("gemm_wgmma.cu", "sm_90a", [])))
        yield types.SimpleNamespace(drv=drv, module=module)
        drv.LIBDIR = None


def _plan(dtype: str) -> tuple[PlannedLaunch, dict[str, np.ndarray], dict[str, bytes]]:
    """The wgmma GEMM's planned launch, its (poisoned) host buffers and encoded maps."""
    w = workloads()["gemm"]
    case = Case(w, w.variants["tensor"], dtype, (130, 272, 112))
    (pl,) = plan_launches(case, H200, launchers=ALL_LAUNCHERS)
    arrays = {name: poisoned(buf) for name, buf in case.buffers().items()}
    maps = {m.buffer: tma_launch.encode_tensor_map(m, arrays[m.buffer].ctypes.data)
            for m in pl.tensor_maps}
    return pl, arrays, maps


def test_param_sizes_are_the_compiled_layout(driver):
    """gemm_wgmma_fp16(TmaDesc tmA, TmaDesc tmB, T* C, i64 M, i64 N, i64 K): two 128-byte
    maps aligned to 64, a pointer and three long longs, as cuFuncGetParamInfo lays them out."""
    fn = cd.DriverFunction(driver.module, "gemm_wgmma_fp16")
    assert fn.param_sizes == (128, 128, 8, 8, 8, 8)
    drv = driver.drv
    assert drv.cuFuncGetParamInfo(fn.fn, 1) == (drv.CUresult.CUDA_SUCCESS, 128, 128)
    assert drv.cuFuncGetParamInfo(fn.fn, 5) == (drv.CUresult.CUDA_SUCCESS, 280, 8)
    assert drv.cuFuncGetParamInfo(fn.fn, 6)[0] == drv.CUresult.CUDA_ERROR_INVALID_VALUE


@pytest.mark.parametrize("dtype", ("fp16", "fp8"))
def test_the_planned_params_have_the_kernels_widths(driver, dtype):
    """What the CuPy backend hands over (param_bytes of the planned launch) is what the
    compiled kernel takes, slot for slot."""
    pl, arrays, maps = _plan(dtype)
    fn = cd.DriverFunction(driver.module, pl.function, pl.smem)
    params = cd.KernelParams(tma_launch.param_bytes(pl.args, lambda b: arrays[b].ctypes.data,
                                                    maps))
    assert params.sizes == fn.param_sizes
    cd.check_params(fn.name, fn.param_sizes, params.sizes)


def test_a_4_byte_int_for_a_long_long_fails_the_launch(driver):
    """M, N and K handed over as np.int32 (4-byte slots) for the kernel's ``long long``s: the
    launch is refused naming the kernel and the argument, before the driver reads the slots
    (nothing runs: the output stays poisoned, the stand-in saw no launch)."""
    pl, arrays, maps = _plan("fp16")
    args = [np.int32(a) if isinstance(a, np.integer) else a for a in pl.args]
    assert sum(isinstance(a, np.int32) for a in args) == 3
    fn = cd.DriverFunction(driver.module, pl.function, pl.smem)
    params = cd.KernelParams(tma_launch.param_bytes(args, lambda b: arrays[b].ctypes.data, maps))
    driver.drv.last_launch_error = "(none)"
    with pytest.raises(cd.ParamMismatch, match=r"^gemm_wgmma_fp16: argument 3 is handed over as "
                                               r"4 bytes for a parameter of 8 bytes"):
        fn.launch(pl.grid, pl.block, pl.smem, 1, params)
    assert driver.drv.last_launch_error == "(none)"
    assert np.isnan(arrays["C"]).all()


def test_a_missing_or_extra_slot_fails_the_launch(driver):
    pl, arrays, maps = _plan("fp16")
    values = tma_launch.param_bytes(pl.args, lambda b: arrays[b].ctypes.data, maps)
    fn = cd.DriverFunction(driver.module, pl.function, pl.smem)
    for wrong in (values[:-1], [*values, cd.pointer_bytes(0)]):
        with pytest.raises(cd.ParamMismatch, match=r"kernel parameters handed over for 6 "):
            fn.launch(pl.grid, pl.block, pl.smem, 1, cd.KernelParams(wrong))


@pytest.mark.parametrize("answer", ("absent", "raises", "index 0 refused"))
def test_a_driver_that_cannot_say_leaves_the_launch_unchecked(monkeypatch, answer):
    """Bindings without cuFuncGetParamInfo, or a driver older than CUDA 12.4 (the call fails):
    no sizes, so no check (a launch is never refused for what the driver cannot tell)."""
    drv = types.SimpleNamespace(CUresult=types.SimpleNamespace(CUDA_SUCCESS=0))
    if answer == "raises":
        def info(fn: Any, i: int) -> Any:
            raise RuntimeError("Function \"cuFuncGetParamInfo\" not found")
        drv.cuFuncGetParamInfo = info
    elif answer == "index 0 refused":
        drv.cuFuncGetParamInfo = lambda fn, i: (500, 0, 0)
    monkeypatch.setattr(cd, "driver_module", lambda: drv)
    assert cd.param_sizes(object()) is None
    cd.check_params("k", None, (4, 8))


def test_the_probe_launcher_hands_over_int32_for_its_int(monkeypatch):
    """The wgmma probe's (in, int iters, out): arg_bytes of the probe's np.int32 is 4 bytes,
    a device array 8 (the sizes the real image gives for a pointer and an int)."""
    arr = types.SimpleNamespace(data=types.SimpleNamespace(ptr=0x1000))
    sizes = cd.KernelParams([cd.arg_bytes(a) for a in (arr, np.int32(3), arr)]).sizes
    cd.check_params("wgmma_fp16", (8, 4, 8), sizes)
    with pytest.raises(cd.ParamMismatch, match="argument 1 is handed over as 8 bytes"):
        cd.check_params("wgmma_fp16", (8, 4, 8),
                        cd.KernelParams([cd.arg_bytes(a) for a in (arr, 3, arr)]).sizes)


def test_the_layout_reads_struct_alignment():
    """A by-value struct's slot starts at a multiple of its alignment (s<bytes>a<align>)."""
    drv, _ = fake_bindings()

    class Lib:
        @staticmethod
        def rb_sig__k() -> bytes:
            return b"i4,s128a64,p,f4"

    fn = drv._Function(drv._Module(Lib(), {"source": "k.cu"}), "k", 0)
    assert [drv.cuFuncGetParamInfo(fn, i)[1:] for i in range(4)] == [
        (0, 4), (64, 128), (192, 8), (200, 4)]
