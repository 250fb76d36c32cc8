"""A PyTorch profiler trace (Kineto's Chrome-trace JSON, ``.json`` or ``.json.gz``) read as a
stream: ``ijson`` (its C backend) yields one event at a time and only what the analysis needs
is kept (a few fields per event; each distinct set of recorded inputs once), so a trace of
hundreds of MB never sits in memory as parsed JSON.

Kept: ``cpu_op`` events (name, thread, time, ``External id``, the recorded inputs: ``Input
Dims``, ``Input type``, ``Input Strides``, ``Concrete Inputs``), the runtime's launches
(``cuda_runtime``/``cuda_driver``, HIP's too: ``correlation``), the device's work (``kernel``,
``gpu_memcpy``, ``gpu_memset``: device, stream, ``correlation``, bytes, ``kernel_flop`` /
``kernel_num_gb`` where Inductor recorded them, a collective's ``Collective name``, message
sizes, group size and dtype where torch recorded them), ``ac2g`` flows (launch -> kernel), steps
(``ProfilerStep#N`` on the CPU and on the GPU) and the trace's head (``deviceProperties``,
``distributedInfo``). Times stay in the trace's microseconds.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from roofbench.bench.errors import UserError

DEVICE_KINDS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "hip_runtime", "runtime")
SHAPE_KEYS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
# Inductor's own counts of a generated kernel, where the trace carries them
INDUCTOR_KEYS = ("kernel_flop", "kernel_num_gb")
# What torch records of a collective (on its NCCL kernel and its ``record_param_comms`` op,
# torch >= 2.1): its name, the message's elements in and out, the group's size, the dtype
COMM_KEYS = ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype")


class TraceError(UserError):
    """A file that is not a readable trace: one line, exit 2."""


@dataclass(frozen=True)
class Inputs:
    """What the profiler recorded of one op's inputs (``record_shapes=True``), as recorded."""

    dims: tuple[Any, ...]
    types: tuple[str, ...]
    strides: tuple[Any, ...] | None  # absent before torch 2.0
    concrete: tuple[Any, ...] | None  # absent before torch 2.1


@dataclass(frozen=True)
class Comm:
    """A collective as torch recorded it (``COMM_KEYS``); None where a field is absent."""

    name: str
    in_nelems: int | None
    out_nelems: int | None
    group: int | None
    dtype: str | None


@dataclass(slots=True)
class Op:
    """One ``cpu_op`` event (an aten op, an autograd node, a compiled region)."""

    name: str
    pid: Any
    tid: Any
    ts: float  # microseconds
    dur: float
    ext: int | None  # External id
    inputs: int  # index into ``Trace.inputs``, -1 when none were recorded
    inductor: tuple[float, float] | None = None  # (kernel_flop, kernel_num_gb)
    comm: Comm | None = None  # a collective's record (``record_param_comms``)


@dataclass(slots=True)
class Launch:
    """One runtime call on a CPU thread that carries a ``correlation`` (a kernel launch, a
    memcpy, a memset)."""

    name: str
    pid: Any
    tid: Any
    ts: float
    dur: float
    corr: int | None
    ext: int | None


@dataclass(slots=True)
class DeviceWork:
    """One piece of work on the device: a kernel, a memcpy or a memset."""

    kind: str  # "kernel", "gpu_memcpy", "gpu_memset"
    name: str
    device: Any
    stream: Any
    ts: float
    dur: float
    corr: int | None
    ext: int | None
    nbytes: int | None  # memcpy/memset
    inductor: tuple[float, float] | None = None
    comm: Comm | None = None  # an NCCL/RCCL kernel's collective, where torch recorded it


@dataclass(slots=True)
class Span:
    """A marked interval: ``ProfilerStep#N`` on a CPU thread or on the GPU."""

    name: str
    ts: float
    dur: float


@dataclass
class Trace:
    path: Path
    head: dict[str, Any]
    ops: list[Op] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    work: list[DeviceWork] = field(default_factory=list)
    steps: list[Span] = field(default_factory=list)
    gpu_steps: list[Span] = field(default_factory=list)
    inputs: list[Inputs] = field(default_factory=list)
    # ac2g flows by id: the launch end ("s": pid, tid, ts) and the kernel end ("f": ...)
    flow_s: dict[Any, tuple[Any, Any, float]] = field(default_factory=dict)
    flow_f: dict[Any, tuple[Any, Any, float]] = field(default_factory=dict)
    events: int = 0

    @property
    def devices(self) -> list[dict[str, Any]]:
        d = self.head.get("deviceProperties") or []
        return [x for x in d if isinstance(x, dict)]

    @property
    def rank(self) -> int | None:
        info = self.head.get("distributedInfo")
        r = info.get("rank") if isinstance(info, dict) else None
        return r if isinstance(r, int) else None

    @property
    def has_shapes(self) -> bool:
        return bool(self.inputs)


def _open(path: Path) -> IO[bytes]:
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


def _tup(v: Any) -> Any:
    return tuple(_tup(x) for x in v) if isinstance(v, list) else v


def _num(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return None
    return None


def read_trace(path: str | Path) -> Trace:
    """The trace at ``path`` (TraceError, one line, when it is not one or is cut short)."""
    import ijson

    p = Path(path)
    try:
        with _open(p) as f:
            head, found = _head(f)
        if not found:
            raise TraceError(f"{p}: not a PyTorch profiler trace (no 'traceEvents')")
        tr = Trace(p, head)
        with _open(p) as f:
            _events(_stream(f, p), tr)
        if "deviceProperties" not in head:  # written after the events (older exporters)
            with _open(p) as f:
                for v in ijson.items(f, "deviceProperties", use_float=True):
                    head["deviceProperties"] = v
    except TraceError:
        raise
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise TraceError(f"{p}: a truncated or damaged .gz ({e})") from None
    except ijson.JSONError as e:
        raise TraceError(f"{p}: not a complete JSON trace ({str(e).splitlines()[0][:80]})") \
            from None
    except json.JSONDecodeError as e:
        raise TraceError(f"{p}: not a complete JSON trace ({e.msg} at character {e.pos} of "
                         "its events)") from None
    except UnicodeDecodeError:
        raise TraceError(f"{p}: not a JSON trace (binary content)") from None
    return tr


CHUNK = 1 << 22  # characters read at a time: the most a trace holds in memory beside its events


def _stream(f: IO[bytes], path: Path) -> Iterator[Any]:
    """The events of ``traceEvents`` one at a time: the file read in chunks, each event
    decoded by json's C scanner (``raw_decode``); an event cut by a chunk's end is decoded
    again once the next chunk is read."""
    text = io.TextIOWrapper(f, encoding="utf-8")
    dec = json.JSONDecoder()
    buf, pos, eof = "", 0, False

    def more() -> bool:
        nonlocal buf, pos, eof
        got = text.read(CHUNK)
        buf, pos = buf[pos:] + got, 0
        eof = not got
        return bool(got)

    key = -1
    while key < 0:  # past the head (read by _head) to the array's opening bracket
        if not more():
            raise TraceError(f"{path}: not a PyTorch profiler trace (no 'traceEvents')")
        key = buf.find('"traceEvents"')
        if key < 0:
            buf, pos = buf[-16:], 0
    pos = buf.index("[", key) + 1 if "[" in buf[key:] else len(buf)
    while True:
        while True:  # whitespace and commas between events
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos < len(buf) or not more():
                break
        if pos >= len(buf):
            raise json.JSONDecodeError("the events end without their closing ']'", buf, pos)
        if buf[pos] == "]":
            return
        try:
            obj, end = dec.raw_decode(buf, pos)
        except json.JSONDecodeError:
            if eof or not more():  # not an event cut by the chunk: a damaged file
                raise
            continue
        pos = end  # an object ends at its closing brace: never cut short by the chunk
        yield obj


def _head(f: IO[bytes]) -> tuple[dict[str, Any], bool]:
    """The top-level keys before ``traceEvents`` (Kineto writes its head first), and whether
    ``traceEvents`` was found."""
    import ijson

    head: dict[str, Any] = {}
    key: str | None = None
    builder: Any = None
    for prefix, event, value in ijson.parse(f, use_float=True):
        if prefix == "" and event == "start_map":
            continue
        if prefix == "" and event in ("map_key", "end_map"):
            if builder is not None and key is not None:
                head[key] = builder.value
            builder = None
            key = value
            if key == "traceEvents":
                return head, True
            continue
        if prefix == "" or key is None:  # a top-level array or scalar: not a trace
            return head, False
        if builder is None:
            builder = ijson.ObjectBuilder()
        builder.event(event, value)
    return head, False


def _events(items: Any, tr: Trace) -> None:
    seen: dict[tuple[str, str, str, str], int] = {}
    ops, launches, work = tr.ops, tr.launches, tr.work
    n = 0
    for e in items:
        n += 1
        if not isinstance(e, dict):
            continue
        ph, cat = e.get("ph"), e.get("cat")
        if ph == "X":
            args = e.get("args") or {}
            ts, dur = e.get("ts"), e.get("dur", 0.0)
            if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
                continue
            if cat == "cpu_op":
                idx = -1
                dims = args.get("Input Dims")
                if dims is not None:
                    strides, conc = args.get("Input Strides"), args.get("Concrete Inputs")
                    types = args.get("Input type")
                    key = (repr(dims), repr(types), repr(strides), repr(conc))  # C-fast
                    idx = seen.get(key, -1)
                    if idx < 0:
                        rec = Inputs(_tup(dims), tuple(types or ()),
                                     _tup(strides) if strides is not None else None,
                                     _tup(conc) if conc is not None else None)
                        idx = seen[key] = len(tr.inputs)
                        tr.inputs.append(rec)
                ops.append(Op(str(e.get("name", "")), e.get("pid"), e.get("tid"), float(ts),
                              float(dur), _num(args.get("External id")), idx,
                              _inductor(args), _comm(args)))
            elif cat in DEVICE_KINDS:
                nb = args.get("bytes")
                work.append(DeviceWork(cat, str(e.get("name", "")),
                                       args.get("device", e.get("pid")),
                                       args.get("stream", e.get("tid")), float(ts), float(dur),
                                       _num(args.get("correlation")),
                                       _num(args.get("External id")),
                                       int(nb) if isinstance(nb, (int, float)) else None,
                                       _inductor(args), _comm(args)))
            elif cat in LAUNCH_CATS and "correlation" in args:
                launches.append(Launch(str(e.get("name", "")), e.get("pid"), e.get("tid"),
                                       float(ts), float(dur), _num(args.get("correlation")),
                                       _num(args.get("External id"))))
            elif cat == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"):
                tr.steps.append(Span(str(e["name"]), float(ts), float(dur)))
            elif cat == "gpu_user_annotation" and str(e.get("name", "")).startswith(
                    "ProfilerStep#"):
                tr.gpu_steps.append(Span(str(e["name"]), float(ts), float(dur)))
        elif cat == "ac2g" and ph in ("s", "f") and "id" in e:
            end = (e.get("pid"), e.get("tid"), float(e.get("ts") or 0.0))
            (tr.flow_s if ph == "s" else tr.flow_f)[e["id"]] = end
    tr.events = n


def _inductor(args: dict[str, Any]) -> tuple[float, float] | None:
    fl, gb = args.get("kernel_flop"), args.get("kernel_num_gb")
    if isinstance(fl, (int, float)) or isinstance(gb, (int, float)):
        return (float(fl) if isinstance(fl, (int, float)) else 0.0,
                float(gb) if isinstance(gb, (int, float)) else 0.0)
    return None


def _comm(args: dict[str, Any]) -> Comm | None:
    name = args.get("Collective name")
    if not isinstance(name, str) or not name:
        return None
    dt = args.get("dtype")
    return Comm(name, _num(args.get("In msg nelems")), _num(args.get("Out msg nelems")),
                _num(args.get("Group size")), dt if isinstance(dt, str) else None)
