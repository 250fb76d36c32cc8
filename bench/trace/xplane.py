"""A JAX profiler trace (``jax.profiler.trace``: ``<host>.xplane.pb``) read through the
``xprof`` package (the ``trace-jax`` extra), each XLA op counted by XLA's own cost analysis.

- **Events**: xprof's XSpace reader (``xprof.profile_data.ProfileData``) yields every event
  of every plane; an XLA op's execution is an event carrying ``hlo_op`` and ``program_id``
  (on XLA:CPU, the thunks on the host's ``XLAPjRtCpuClient`` threads). Where a device plane
  (``/device:...``) has such events, only those are read (the host's are its launches).
  An event that holds other XLA op events on its line (a ``while``, a ``call``) is their
  container: its time is theirs, so it is left out.
- **HLO**: xprof's ``graph_viewer`` converter gives each module the xplane carries as HLO
  text (the module ``<name>(<program_id>)``: the optimized program that ran).
- **Counts**: XLA's ``HloCostAnalysis`` (jaxlib's ``hlo_module_cost_analysis``: what
  ``compiled.cost_analysis()`` runs on a whole program) on a module holding the one
  instruction (its called computations kept, its operands made parameters): its FLOPs, its
  bytes accessed (the output's are its writes, the rest its reads). The xplane of an XLA:CPU
  run carries no per-op counts (xprof's own op_profile and roofline tools are empty for it),
  hence the cost analysis here; over a module's ops the FLOPs add up to the whole program's.

xprof writes its caches beside the xplane it converts: it converts a copy in a temporary
folder, so the user's trace folder is never written to.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofbench.bench.trace.reader import TraceError

SUFFIX = ".xplane.pb"
NEED_XPROF = ("reading a JAX trace (.xplane.pb) needs the xprof and jax packages: pip "
              "install 'roofbench[trace-jax]'")
FLOPS_BY = "XLA's HloCostAnalysis of the op (what compiled.cost_analysis() counts)"
# HLO element types, as roofbench names dtypes
HLO_DTYPES = {"f64": "float64", "f32": "float32", "bf16": "bfloat16", "f16": "float16",
              "s64": "int64", "s32": "int32", "s16": "int16", "s8": "int8", "u8": "uint8",
              "pred": "bool", "c64": "complex64", "c128": "complex128",
              "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
MATMUL = ("dot", "convolution")
LAYOUT = ("copy", "transpose", "broadcast", "reshape", "bitcast", "slice", "concatenate",
          "pad", "reverse", "dynamic-slice", "dynamic-update-slice", "gather", "scatter",
          "parameter", "constant", "tuple", "get-tuple-element", "iota", "convert")


def is_xplane(path: Path) -> bool:
    return path.name.endswith(SUFFIX)


@dataclass(frozen=True)
class XlaOp:
    """One executed XLA op (distinct by module and name), counted."""

    module: str
    name: str
    flops: int
    reads: int
    writes: int
    dtype: str
    family: str
    text: str  # the instruction's HLO, shortened


@dataclass
class XlaTrace:
    path: Path
    host: str
    device: bool  # read from a device plane (a GPU's, a TPU's), not the host's
    planes: list[str]
    calls: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # seconds
    ops: dict[tuple[str, str], XlaOp | str] = field(default_factory=dict)  # or why not
    events: int = 0
    containers: int = 0


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """xprof's C++ logs every step to the process's stderr: silenced while it converts,
    the descriptor put back as found (even on an error or an interrupt)."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _xprof() -> tuple[Any, Any]:
    try:
        import jax  # noqa: F401  (its HLO parser and cost analysis count the ops)
        from xprof.convert import raw_to_tool_data
        from xprof.profile_data import ProfileData
    except ImportError:
        raise TraceError(NEED_XPROF) from None
    return raw_to_tool_data, ProfileData


def read_xplane(path: str | Path) -> XlaTrace:
    """The XLA ops of the xplane at ``path``, timed and counted (TraceError, one line, when
    it is not one, or xprof is missing)."""
    convert, profile_data = _xprof()
    p = Path(path)
    with tempfile.TemporaryDirectory(prefix="roofbench-xplane-") as tmp:
        copy = Path(tmp) / p.name
        shutil.copyfile(p, copy)
        with _quiet_stderr():
            try:
                data = profile_data.from_file(str(copy))
            except ValueError:
                raise TraceError(f"{p}: not a JAX profiler trace (xprof cannot read it as "
                                 "an XSpace)") from None
            tr = _events(p, data)
            if not tr.calls:
                raise TraceError(f"{p}: a JAX trace with no XLA ops (was a jitted function "
                                 "run inside jax.profiler.trace?)")
            convert.xspace_to_tool_names([str(copy)])  # writes <module>.hlo_proto.pb there
            modules = {m.group(1): f.name.removesuffix(".hlo_proto.pb")
                       for f in Path(tmp).glob("*.hlo_proto.pb")
                       if (m := re.search(r"\((\d+)\)\.hlo_proto\.pb$", f.name))}
            texts: dict[str, str | None] = {}
            for prog in {m for m, _ in tr.calls}:
                mod = modules.get(prog)
                if mod is not None:
                    try:
                        raw, _ = convert.xspace_to_tool_data(
                            [str(copy)], "graph_viewer",
                            {"graph_viewer_options": {"module_name": mod, "type": "long_txt"}})
                    except ValueError:
                        raw = None
                    texts[prog] = raw.decode() if isinstance(raw, bytes) else raw
        for (prog, op) in tr.calls:
            text = texts.get(prog)
            tr.ops[(prog, op)] = (count_op(modules.get(prog, prog), text, op) if text
                                  else f"the xplane carries no HLO for program {prog}")
    return tr


def _events(p: Path, data: Any) -> XlaTrace:
    """The XLA op events (module doc) of each plane: program id, op name, seconds."""
    planes = list(data.planes)
    found: dict[str, list[list[tuple[float, float, str, str]]]] = {}
    for pl in planes:
        lines = []
        for ln in pl.lines:
            evs = []
            for e in ln.events:
                st = dict(e.stats)
                if "hlo_op" in st and "program_id" in st:
                    evs.append((float(e.start_ns), float(e.duration_ns), str(st["program_id"]),
                                e.name))
            if evs:  # by start, a container before the ops it holds
                lines.append(sorted(evs, key=lambda e: (e[0], -e[1])))
        if lines:
            found[pl.name] = lines
    device = [n for n in found if n.startswith("/device:")]
    use = device or list(found)
    host = p.name.removesuffix(SUFFIX)
    tr = XlaTrace(p, host, bool(device), use)
    for name in use:
        for evs in found[name]:
            for i, (t0, dur, prog, op) in enumerate(evs):
                tr.events += 1
                if i + 1 < len(evs) and evs[i + 1][0] < t0 + dur:
                    tr.containers += 1  # its time is the ops inside it
                    continue
                tr.calls.setdefault((prog, op), []).append(dur * 1e-9)
    return tr


# ------------------------------------------------------------------ counting one instruction


def _shape(text: str) -> str:
    """The result shape of an HLO instruction's text: ``%x = f32[4]{0} add(...)``."""
    rhs = text.split(" = ", 1)[1].lstrip()
    if rhs.startswith("("):  # a tuple shape: to its matching parenthesis
        depth = 0
        for i, ch in enumerate(rhs):
            depth += (ch == "(") - (ch == ")")
            if depth == 0:
                return rhs[:i + 1]
    return rhs.split(" ", 1)[0]


def _dtype(shape: str) -> str:
    m = re.match(r"\(?\s*([a-z0-9]+)\[", shape)
    return HLO_DTYPES.get(m.group(1), m.group(1)) if m else "float32"


def _name(text: str) -> str:
    return text.split(" = ", 1)[0].strip().removeprefix("ROOT ").lstrip("%")


def single_op_module(module_text: str, inst: Any) -> str:
    """A module running ``inst`` alone: the module's computations other than its entry (the
    ones ``inst`` calls among them), and an entry taking ``inst``'s operands as parameters."""
    blocks = re.split(r"\n\s*\n", module_text.strip())
    keep = [b for b in blocks[1:] if not b.lstrip().startswith("ENTRY")]
    params, seen = [], set()
    for op in inst.operands():
        t = op.to_string()
        n = _name(t)
        if n in seen:
            continue
        seen.add(n)
        params.append((n, _shape(t)))
    sig = ", ".join(f"p{i}: {s}" for i, (_, s) in enumerate(params))
    out = _shape(inst.to_string())
    body = [f"  %{n} = {s} parameter({i})" for i, (n, s) in enumerate(params)]
    body.append("  ROOT " + inst.to_string().strip().removeprefix("ROOT "))
    entry = f"ENTRY %roofbench_op ({sig}) -> {out} {{\n" + "\n".join(body) + "\n}"
    return "HloModule roofbench_op\n\n" + "\n\n".join([*keep, entry]) + "\n"


def _code(inst: Any) -> str:
    return str(inst.opcode).removeprefix("HloOpcode.k").lower()


def _called(mod: Any, inst: Any) -> list[Any]:
    """The instructions of the computation ``inst`` calls (a fusion's), if any."""
    m = re.search(r"calls=%?([\w.\-]+)", inst.to_string())
    if not m:
        return []
    return [i for c in mod.computations() if c.name == m.group(1) for i in c.instructions()]


def _family(codes: set[str], flops: int) -> str:
    if codes & set(MATMUL):
        return "matmul/conv/attention"
    if "reduce" in codes or "reduce-window" in codes:
        return "reductions"
    if not flops and codes <= set(LAYOUT) | {"fusion"}:
        return "copies/layout"
    return "element-wise"


def _hlo() -> Any:
    """jaxlib's HLO bindings (the parser of HLO text), as jax's own xla_client holds them."""
    from jax._src.lib import xla_client

    return xla_client.hlo


def cost(module_text: str) -> dict[str, float]:
    """XLA's cost analysis of an HLO module's text (the CPU client's: the same counts)."""
    import jax
    from jax._src.lib import _jax

    client = jax.devices("cpu")[0].client
    got = _jax.hlo_module_cost_analysis(client, _hlo().hlo_module_from_text(module_text))
    return {str(k): float(v) for k, v in got.items()}


def count_op(module: str, module_text: str, op: str) -> XlaOp | str:
    """The op ``op`` of the module in ``module_text`` counted, or why it is not."""
    try:
        mod = _hlo().hlo_module_from_text(module_text)
    except Exception as e:  # XLA's parser: its message, one line
        return f"its module's HLO does not parse ({str(e).splitlines()[0][:80]})"
    inst = next((i for c in mod.computations() for i in c.instructions() if i.name == op),
                None)
    if inst is None:
        return f"no instruction {op!r} in {module}"
    try:
        ca = cost(single_op_module(module_text, inst))
    except Exception as e:
        return f"XLA's cost analysis failed on it ({str(e).splitlines()[0][:80]})"
    flops = int(ca.get("flops", 0))
    total = int(ca.get("bytes accessed", 0))
    writes = int(ca.get("bytes accessedout{}", 0))
    inner = [inst, *_called(mod, inst)]
    codes = {_code(i) for i in inner}
    dtype = _dtype(_shape(inst.to_string()))
    mm = next((i for i in inner if _code(i) in MATMUL and i.operands()), None)
    if mm is not None:  # the precision a matmul runs in: its inputs', not its sum's
        dtype = _dtype(_shape(mm.operands()[0].to_string()))
    return XlaOp(module, op, flops, max(0, total - writes), writes, dtype,
                 _family(codes, flops), inst.to_string()[:160])


# ------------------------------------------------------------------ the analysis


def analyse_xla(traces: list[XlaTrace]) -> Any:
    """The ``Analysis`` the placing code takes: one unit per XLA op (module and name), each
    call its event's duration; the trace's time is its ops' (nothing else is an op)."""
    from roofbench.bench.profile.recording import Distinct
    from roofbench.bench.trace.analyse import Analysis, OpStat
    from roofbench.bench.trace.counts import Counted

    stats: dict[tuple[str, str], OpStat] = {}
    ranks, notes = [], []
    for r, tr in enumerate(traces):
        for key, times in tr.calls.items():
            got = tr.ops[key]
            st = stats.get(key)
            if st is None:
                if isinstance(got, XlaOp):
                    d = Distinct(0, f"{got.module}/{got.name}", got.name, got.family,
                                 got.flops, FLOPS_BY, got.reads, got.writes, got.text,
                                 dtype=got.dtype, device="xla" if tr.device else "cpu")
                    counted = Counted(d)
                else:
                    counted = Counted(None, got)
                st = stats[key] = OpStat(f"{key[0]}/{key[1]}" if not isinstance(got, XlaOp)
                                         else f"{got.module}/{got.name}", None, counted)
            st.times_s += times
        spent = sum(sum(v) for v in tr.calls.values())
        ranks.append({"file": str(tr.path), "rank": r, "events": tr.events,
                      "ops": sum(len(v) for v in tr.calls.values()), "device_work": 0,
                      "ops_s": spent, "trace_s": spent, "planes": tr.planes})
        if tr.containers:
            notes.append(f"{tr.path.name}: {tr.containers} XLA op event(s) hold others (a "
                         "while, a call): their time is the ops inside them")
    notes.append("a JAX trace: each XLA op counted by " + FLOPS_BY + ", on the HLO the "
                 "xplane carries (docs/trace.md)")
    ops = sorted(stats.values(), key=lambda s: -s.total_s)
    gpu = any(tr.device for tr in traces)
    return Analysis([str(tr.path) for tr in traces], gpu, None, ops,
                    sum(o.total_s for o in ops), {}, [], ranks, {}, notes, True, {})
