"""An op a trace recorded, counted by the rules ``roofbench.profile`` counts a live op with:
one rule set, two front doors.

The trace gives each ``cpu_op`` its inputs as recorded (``Input Dims``, ``Input type``,
``Input Strides``, ``Concrete Inputs``), not the tensors. They are rebuilt as *meta* tensors
(shape, dtype and strides, no data) and the scalars from their recorded values; the op's
overload is the schema those inputs fit; the op is run on them (meta kernels compute the
results' shapes and strides, nothing is computed) and handed to ``Recorder.record``, the
function that records a live call in ``profile``: the same family, torch's flop registry or
the same convention, the same unique-span bytes, the same indexed-op rules
(``indexed_bytes``: where a rule needs the index's values, which no trace records, it counts
the index's size, an upper bound).

Which ops are counted (``counted_level``): the ops ``profile``'s dispatch mode sees, below
autograd and after composite ops decompose: an ``aten::`` op that is not
CompositeImplicitAutograd (``matmul``, ``linear``, ``layer_norm``, ``to`` decompose: their
children are counted), with no counted op above it (``mm`` inside ``matmul`` is counted,
``empty_strided`` inside ``_to_copy`` is ``_to_copy``'s own work).
"""

from __future__ import annotations

import ast
import functools
import warnings
from dataclasses import dataclass
from typing import Any

from roofbench.bench.profile.recording import Distinct, Recorder
from roofbench.bench.trace.reader import Inputs

from roofbench.errors_text import first_line

# The C++ type names the profiler writes for a tensor's dtype (``Input type``)
DTYPES = {"float": "float32", "double": "float64", "c10::Half": "float16",
          "c10::BFloat16": "bfloat16", "long int": "int64", "long": "int64", "int": "int32",
          "short int": "int16", "short": "int16", "signed char": "int8",
          "unsigned char": "uint8", "bool": "bool", "c10::complex<float>": "complex64",
          "c10::complex<double>": "complex128", "c10::complex<c10::Half>": "complex32",
          "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
          "c10::Float8_e4m3fnuz": "float8_e4m3fnuz", "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
          "unsigned int": "uint32", "unsigned long": "uint64"}
# c10::ScalarType's numbers, as ``Concrete Inputs`` writes a dtype argument
SCALAR_TYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
                "complex32", "complex64", "complex128", "bool", "qint8", "quint8", "qint32",
                "bfloat16", "quint4x2", "quint2x4", "bits1x8", "bits2x4", "bits4x2", "bits8",
                "bits16", "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz",
                "float8_e4m3fnuz")
# A Python number passed to a tensor op (``x * 2.0``) is recorded as a 0-dim tensor of
# these types; ``profile``'s dispatch mode is handed the number, which moves no bytes. Its
# value is not recorded: no count depends on it (a power's exponent is a Scalar, recorded).
WRAPPED = ("double", "long int", "bool", "c10::complex<double>")
COMPILED = ("CompiledFunction", "CompiledFunctionBackward", "Torch-Compiled Region")


@dataclass(frozen=True)
class Counted:
    """One recorded op's counts (``distinct`` as ``profile`` builds it), or why none."""

    distinct: Distinct | None
    why: str = ""  # why not counted


def is_compiled(name: str) -> bool:
    return name.startswith(COMPILED)


@functools.lru_cache(maxsize=4096)
def _schemas(name: str) -> tuple[Any, ...]:
    import torch

    try:
        return tuple(torch._C._jit_get_schemas_for_operator(name))
    except RuntimeError:
        return ()


@functools.lru_cache(maxsize=8192)
def _composite(qualified: str) -> bool:
    import torch

    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(
            qualified, "CompositeImplicitAutograd"))
    except RuntimeError:
        return False


def _fits(arg_type: str, rec_type: str) -> bool:
    """Whether an input recorded as ``rec_type`` can be the schema's ``arg_type``."""
    t = arg_type.removeprefix("Optional[").removesuffix("]")
    if rec_type == "":  # None, or a value the profiler writes no type for (a device)
        return True
    if rec_type in DTYPES:
        return t == "Tensor"
    if rec_type == "TensorList":
        return t.startswith("List[Tensor") or t.startswith("List[Optional[Tensor")
    if rec_type == "ScalarList":
        return t.startswith("List[") and "Tensor" not in t
    if rec_type == "Scalar":
        return t in ("number", "int", "float", "bool", "ScalarType", "Layout", "Device",
                     "MemoryFormat", "SymInt", "str", "complex", "Generator") or \
            t.startswith("List[")
    return t not in ("Tensor",)


def _writes_out(schema: Any) -> bool:
    return any(a.kwarg_only and a.name.startswith("out") for a in schema.arguments)


def overload(name: str, rec: Inputs | None) -> tuple[Any, Any] | None:
    """(OpOverload, its schema) of ``name`` ("aten::add") that the recorded inputs fit; the
    non-``out`` overloads first. None: unknown op, or nothing fits."""
    import torch

    if not name.startswith("aten::"):
        return None
    schemas = _schemas(name)
    if rec is None:  # no shapes: the first overload, for the composite test only
        cands = list(schemas)
    else:
        n = len(rec.types)
        # every argument recorded (torch >= 2.0), else the leading ones with the rest at
        # their defaults (older traces); an out= overload only when its out was recorded
        cands = [s for s in schemas if (len(s.arguments) == n or (
            n < len(s.arguments) and not _writes_out(s)
            and all(a.has_default_value() for a in s.arguments[n:])))
            and all(_fits(str(a.type), rec.types[i]) for i, a in enumerate(s.arguments[:n]))]
        cands.sort(key=lambda s: (_writes_out(s), len(s.arguments) != n))
    if not cands:
        return None
    s = cands[0]
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
    if packet is None:
        return None
    func = getattr(packet, s.overload_name or "default", None)
    return (func, s) if func is not None else None


def is_counted_level(name: str, rec: Inputs | None) -> bool:
    """Whether ``profile``'s dispatch mode sees this op itself (module doc): an aten op
    whose overload is not CompositeImplicitAutograd. Without shapes, any overload of the
    name that has its own kernel."""
    if not name.startswith("aten::"):
        return False
    got = overload(name, rec)
    if got is not None:
        return not _composite(got[0].name())
    schemas = _schemas(name)
    return bool(schemas) and not all(
        _composite(f"{name}.{s.overload_name}" if s.overload_name else name) for s in schemas)


def _scalar(text: Any, arg_type: str) -> Any:
    """A recorded ``Concrete Inputs`` value as the schema's type wants it."""
    import torch

    t = arg_type.removeprefix("Optional[").removesuffix("]")
    if text in ("", None):
        return None
    if t == "Device":
        return torch.device("meta")
    if t == "ScalarType":
        i = int(text)
        name = SCALAR_TYPES[i] if 0 <= i < len(SCALAR_TYPES) else "float32"
        return getattr(torch, name, torch.float32)
    if t == "Layout":
        return torch.strided
    if t == "MemoryFormat":
        return (torch.contiguous_format, torch.preserve_format, torch.channels_last,
                torch.channels_last_3d)[int(text)] if str(text).isdigit() and int(text) < 4 \
            else None
    if t == "str":
        return str(text)
    try:
        v = ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return str(text)
    if t == "bool":
        return bool(v)
    return v


def _placeholder(arg: Any) -> Any:
    """A scalar the trace did not record (torch < 2.1 writes no ``Concrete Inputs``): the
    schema's default, else a value of its type that every op takes."""
    if arg.has_default_value():
        return arg.default_value
    t = str(arg.type)
    if "List" in t:
        return []
    return {"int": 0, "SymInt": 0, "float": 1.0, "bool": False, "number": 1}.get(t)


def _meta_tensor(dims: Any, strides: Any, dtype: str) -> Any:
    import torch

    dt = getattr(torch, dtype, torch.float32)
    shape = tuple(int(x) for x in dims)
    if strides and len(strides) == len(shape):
        return torch.empty_strided(shape, tuple(int(s) for s in strides), dtype=dt,
                                   device="meta")
    return torch.empty(shape, dtype=dt, device="meta")


def rebuild(func_schema: Any, rec: Inputs, list_dtype: str) -> tuple[tuple[Any, ...],
                                                                    dict[str, Any]]:
    """The call's (args, kwargs): meta tensors and recorded scalars, in the schema's
    order (the profiler records every argument, keyword-only ones too). A TensorList's
    dtype is not recorded: ``list_dtype`` (the op's other tensors', else the trace's)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for i, a in enumerate(func_schema.arguments):
        if i >= len(rec.types):  # not recorded (older traces): its default
            break
        typ = rec.types[i]
        dims = rec.dims[i] if i < len(rec.dims) else ()
        strides = rec.strides[i] if rec.strides is not None and i < len(rec.strides) else None
        conc = rec.concrete[i] if rec.concrete is not None and i < len(rec.concrete) else None
        if typ in DTYPES and i > 0 and dims in ((), []) and typ in WRAPPED and \
                rec.types[0] in DTYPES:
            v: Any = 1.0 if typ == "double" else 1  # a Python number the call was given
        elif typ in DTYPES:
            v = _meta_tensor(dims, strides, DTYPES[typ])
        elif typ == "TensorList":
            v = [_meta_tensor(d, strides[k] if strides and k < len(strides) else None,
                              list_dtype) for k, d in enumerate(dims or ())]
        elif typ == "":
            v = None
        elif rec.concrete is None:
            v = _placeholder(a)
        else:
            v = _scalar(conc, str(a.type))
            if v is None and not str(a.type).startswith("Optional"):
                v = _placeholder(a)
        if a.kwarg_only:
            kwargs[a.name] = v
        else:
            args.append(v)
    return tuple(args), kwargs


def list_dtype_of(rec: Inputs, default: str) -> str:
    got = [DTYPES[t] for t in rec.types if t in DTYPES]
    return got[0] if got else default


def count(name: str, rec: Inputs | None, default_dtype: str = "float32") -> Counted:
    """The op ``name`` with the inputs the trace recorded, counted by ``profile``'s rules
    (``Recorder.record`` on meta tensors); why not, where it cannot be."""
    if rec is None:
        return Counted(None, "no shapes recorded (record_shapes=False)")
    got = overload(name, rec)
    if got is None:
        return Counted(None, "no overload of the op fits its recorded inputs")
    func, schema = got
    try:
        args, kwargs = rebuild(schema, rec, list_dtype_of(rec, default_dtype))
        with warnings.catch_warnings():  # torch's own about the meta call, not the user's
            warnings.simplefilter("ignore")
            out = func(*args, **kwargs)
            r = Recorder(clone=False)
            r.record(func, args, kwargs, out)
    except Exception as e:  # no meta kernel, a scalar not recorded: said, time still charged
        return Counted(None, "could not be rebuilt from its recorded inputs "
                             f"({type(e).__name__}: {first_line(e, typed=False)[:80]})")
    return Counted(r.distinct[r.calls[-1].distinct])
