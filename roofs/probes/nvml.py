"""Device facts and clocks from NVML (nvidia-ml-py), failing soft.

Everything here is optional information around a measurement: a machine without a GPU, without
nvidia-ml-py, or with a driver that does not support one query still gets a dict (the missing
fields are None). ``pynvml`` and ``cupy`` are imported lazily, inside the functions, so that
importing roofbench never needs them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

_state: dict[str, Any] = {"nvml": None, "init_failed": None}

# Throttle ("clock event") reason bits, as NVML defines them; named here so a snapshot reads
# as words. GPU idle is not a throttle for our purposes but is reported like the others.
_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
# Reasons that mean the SM clock was held below what the chip can do under load.
THROTTLING = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown",
                        "hw_thermal_slowdown", "hw_power_brake_slowdown", "board_limit"})


def _nvml() -> Any | None:
    """The initialised pynvml module, or None (not installed, no driver, no device)."""
    if _state["nvml"] is not None:
        return _state["nvml"]
    if _state["init_failed"] is not None:
        return None
    try:
        mod = importlib.import_module("pynvml")
        mod.nvmlInit()
    except Exception as e:  # ImportError, NVMLError (no driver / library), OSError
        _state["init_failed"] = f"{type(e).__name__}: {e}"
        return None
    _state["nvml"] = mod
    return mod


def reset() -> None:
    """Forget the cached NVML state (tests swap in a fake module)."""
    _state["nvml"] = None
    _state["init_failed"] = None


def unavailable_reason() -> str | None:
    """None when NVML answers, else why not."""
    return None if _nvml() is not None else (_state["init_failed"] or "NVML unavailable")


def available() -> bool:
    nv = _nvml()
    if nv is None:
        return False
    try:
        return int(nv.nvmlDeviceGetCount()) > 0
    except Exception:
        return False


def device_count() -> int:
    """NVML devices on this machine (0 without NVML)."""
    nv = _nvml()
    if nv is None:
        return 0
    try:
        return int(nv.nvmlDeviceGetCount())
    except Exception:
        return 0


def _try(fn: Callable[[], Any]) -> Any:
    """One query, None if NVML says it is unsupported or fails."""
    try:
        return fn()
    except Exception:
        return None


def _text(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes) else v


def _handle(nv: Any, index: int) -> Any | None:
    return _try(lambda: nv.nvmlDeviceGetHandleByIndex(index))


def _reasons(mask: int | None) -> list[str] | None:
    if mask is None:
        return None
    return [name for bit, name in _REASONS.items() if mask & bit]


def snapshot(index: int = 0) -> dict[str, Any]:
    """Clocks, temperature and power now. Cheap (a few microseconds per query)."""
    out: dict[str, Any] = {"sm_clock_mhz": None, "mem_clock_mhz": None, "max_sm_clock_mhz": None,
                           "max_mem_clock_mhz": None, "temp_c": None, "power_w": None,
                           "throttle_reasons": None, "throttled": None}
    nv = _nvml()
    h = _handle(nv, index) if nv is not None else None
    if nv is None or h is None:
        return out
    sm, mem = getattr(nv, "NVML_CLOCK_SM", 1), getattr(nv, "NVML_CLOCK_MEM", 2)
    out["sm_clock_mhz"] = _try(lambda: nv.nvmlDeviceGetClockInfo(h, sm))
    out["mem_clock_mhz"] = _try(lambda: nv.nvmlDeviceGetClockInfo(h, mem))
    out["max_sm_clock_mhz"] = _try(lambda: nv.nvmlDeviceGetMaxClockInfo(h, sm))
    out["max_mem_clock_mhz"] = _try(lambda: nv.nvmlDeviceGetMaxClockInfo(h, mem))
    out["temp_c"] = _try(lambda: nv.nvmlDeviceGetTemperature(
        h, getattr(nv, "NVML_TEMPERATURE_GPU", 0)))
    mw = _try(lambda: nv.nvmlDeviceGetPowerUsage(h))
    out["power_w"] = mw / 1000.0 if mw is not None else None
    # The "event reasons" call replaced the "throttle reasons" one; try the new name first.
    mask = _try(lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h))
    if mask is None:
        mask = _try(lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))
    reasons = _reasons(mask)
    out["throttle_reasons"] = reasons
    out["throttled"] = None if reasons is None else bool(THROTTLING.intersection(reasons))
    return out


def _cuda_runtime_facts(index: int) -> dict[str, Any]:
    """SM count, compute capability, L2 size from the CUDA runtime through CuPy, if importable."""
    try:
        cp = importlib.import_module("cupy")
        props = cp.cuda.runtime.getDeviceProperties(index)
    except Exception:
        return {}
    out: dict[str, Any] = {
        "sm_count": props.get("multiProcessorCount"),
        "compute_capability": (f"{props['major']}.{props['minor']}"
                               if "major" in props and "minor" in props else None),
        "l2_bytes": props.get("l2CacheSize"),
        "smem_per_sm_bytes": props.get("sharedMemPerMultiprocessor"),
        "smem_per_block_optin_bytes": props.get("sharedMemPerBlockOptin"),
        "regs_per_sm": props.get("regsPerMultiprocessor"),
        "max_threads_per_sm": props.get("maxThreadsPerMultiProcessor"),
        "warp_size": props.get("warpSize"),
    }
    # clockRate / memoryClockRate (kHz) left cudaDeviceProp in CUDA 13; use them when present.
    if props.get("clockRate"):
        out["runtime_sm_clock_mhz"] = props["clockRate"] / 1000.0
    if props.get("memoryClockRate"):
        out["runtime_mem_clock_mhz"] = props["memoryClockRate"] / 1000.0
    if props.get("memoryBusWidth"):
        out["runtime_bus_width_bits"] = props["memoryBusWidth"]
    name = props.get("name")
    if name:
        out["runtime_name"] = _text(name)
    return out


def device_facts(index: int = 0) -> dict[str, Any]:
    """Name, memory, bus width, max clocks, driver/CUDA versions, PCI id, SMs, compute
    capability. Missing facts are None; ``nvml_error`` says why NVML gave nothing."""
    out: dict[str, Any] = {"index": index, "name": None, "memory_total_bytes": None,
                           "bus_width_bits": None, "max_sm_clock_mhz": None,
                           "max_mem_clock_mhz": None, "driver_version": None,
                           "cuda_driver_version": None, "pci_bus_id": None, "pci_device_id": None,
                           "sm_count": None, "compute_capability": None, "cuda_cores": None}
    nv = _nvml()
    h = _handle(nv, index) if nv is not None else None
    if nv is None:
        out["nvml_error"] = unavailable_reason()
    elif h is None:
        out["nvml_error"] = f"no NVML device {index}"
    if nv is not None:
        out["driver_version"] = _text(_try(nv.nvmlSystemGetDriverVersion))
        v = _try(nv.nvmlSystemGetCudaDriverVersion)
        out["cuda_driver_version"] = f"{v // 1000}.{(v % 1000) // 10}" if isinstance(v, int) \
            else None
    if nv is not None and h is not None:
        out["name"] = _text(_try(lambda: nv.nvmlDeviceGetName(h)))
        mem = _try(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        out["memory_total_bytes"] = getattr(mem, "total", None)
        out["bus_width_bits"] = _try(lambda: nv.nvmlDeviceGetMemoryBusWidth(h))
        sm, memc = getattr(nv, "NVML_CLOCK_SM", 1), getattr(nv, "NVML_CLOCK_MEM", 2)
        out["max_sm_clock_mhz"] = _try(lambda: nv.nvmlDeviceGetMaxClockInfo(h, sm))
        out["max_mem_clock_mhz"] = _try(lambda: nv.nvmlDeviceGetMaxClockInfo(h, memc))
        pci = _try(lambda: nv.nvmlDeviceGetPciInfo(h))
        if pci is not None:
            out["pci_bus_id"] = _text(getattr(pci, "busId", None))
            dev_id = getattr(pci, "pciDeviceId", None)
            out["pci_device_id"] = f"0x{dev_id:08x}" if isinstance(dev_id, int) else None
        cc = _try(lambda: nv.nvmlDeviceGetCudaComputeCapability(h))
        if isinstance(cc, tuple) and len(cc) == 2:
            out["compute_capability"] = f"{cc[0]}.{cc[1]}"
        out["cuda_cores"] = _try(lambda: nv.nvmlDeviceGetNumGpuCores(h))
    rt = _cuda_runtime_facts(index)
    for k, v in rt.items():
        if v is not None and (out.get(k) is None):
            out[k] = v
    if out["name"] is None and rt.get("runtime_name"):
        out["name"] = rt["runtime_name"]
    return out
