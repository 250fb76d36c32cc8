"""roofs/probes/nvml.py against a fake pynvml: fields mapped, units converted, failures soft."""

from __future__ import annotations

import sys
import types

import pytest
from roofbench.roofs.probes import nvml


class _NVMLError(Exception):
    pass


def _fake_pynvml(*, fail_init: bool = False, unsupported: tuple[str, ...] = ()) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM, m.NVML_TEMPERATURE_GPU = 1, 2, 0
    m.NVMLError = _NVMLError

    def guard(name, fn):
        def wrapped(*a):
            if name in unsupported:
                raise _NVMLError("Not Supported")
            return fn(*a)
        return wrapped

    def init():
        if fail_init:
            raise _NVMLError("Driver Not Loaded")

    clocks = {1: 1755, 2: 3201}
    max_clocks = {1: 1980, 2: 3201}
    funcs = {
        "nvmlInit": init,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: ("h", i),
        "nvmlDeviceGetName": lambda h: b"NVIDIA H200",
        "nvmlDeviceGetClockInfo": lambda h, t: clocks[t],
        "nvmlDeviceGetMaxClockInfo": lambda h, t: max_clocks[t],
        "nvmlDeviceGetTemperature": lambda h, s: 41,
        "nvmlDeviceGetPowerUsage": lambda h: 123456,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x4 | 0x1,
        "nvmlDeviceGetCurrentClocksThrottleReasons": lambda h: 0x0,
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=150_754_820_096),
        "nvmlDeviceGetMemoryBusWidth": lambda h: 6144,
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(busId=b"00000000:19:00.0",
                                                                pciDeviceId=0x233510DE),
        "nvmlDeviceGetCudaComputeCapability": lambda h: (9, 0),
        "nvmlDeviceGetNumGpuCores": lambda h: 16896,
        "nvmlSystemGetDriverVersion": lambda: "580.65.06",
        "nvmlSystemGetCudaDriverVersion": lambda: 13000,
    }
    for name, fn in funcs.items():
        setattr(m, name, guard(name, fn))
    return m


@pytest.fixture
def fake(monkeypatch):
    def install(**kw):
        monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(**kw))
        monkeypatch.setitem(sys.modules, "cupy", None)  # CUDA runtime facts: not importable
        nvml.reset()
    yield install
    nvml.reset()


def test_snapshot_maps_fields(fake):
    fake()
    assert nvml.available()
    s = nvml.snapshot(0)
    assert s["sm_clock_mhz"] == 1755 and s["max_sm_clock_mhz"] == 1980
    assert s["mem_clock_mhz"] == 3201 and s["temp_c"] == 41
    assert s["power_w"] == pytest.approx(123.456)
    assert s["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert s["throttled"] is True


def test_device_facts(fake):
    fake()
    f = nvml.device_facts(0)
    assert f["name"] == "NVIDIA H200"
    assert f["memory_total_bytes"] == 150_754_820_096
    assert f["bus_width_bits"] == 6144
    assert f["max_mem_clock_mhz"] == 3201
    assert f["driver_version"] == "580.65.06" and f["cuda_driver_version"] == "13.0"
    assert f["pci_bus_id"] == "00000000:19:00.0" and f["pci_device_id"] == "0x233510de"
    assert f["compute_capability"] == "9.0"
    assert f["sm_count"] is None  # only the CUDA runtime knows; cupy is absent here
    assert "nvml_error" not in f


def test_unsupported_queries_are_none(fake):
    fake(unsupported=("nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetPowerUsage",
                      "nvmlDeviceGetCurrentClocksEventReasons"))
    s = nvml.snapshot()
    assert s["power_w"] is None
    assert s["throttle_reasons"] == [] and s["throttled"] is False  # fell back to old call
    assert nvml.device_facts()["bus_width_bits"] is None


def test_no_driver_fails_soft(fake):
    fake(fail_init=True)
    assert not nvml.available()
    assert nvml.snapshot()["sm_clock_mhz"] is None
    f = nvml.device_facts()
    assert f["name"] is None and "Driver Not Loaded" in f["nvml_error"]


def test_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "cupy", None)
    nvml.reset()
    try:
        assert not nvml.available()
        assert nvml.unavailable_reason()
        assert nvml.device_facts()["name"] is None
    finally:
        nvml.reset()
