"""What one aten op does, counted: its family, its FLOPs, its bytes. Pure functions of the
recorded call (``recording.OpCall``), written once; the conventions below are the ones
every report states.

FLOPs: torch's own flop registry (``torch.utils.flop_counter.flop_registry``) where it has
the op (mm, addmm, bmm, baddbmm, convolution, the SDPA kernels), called directly on the
recorded arguments; the CPU SDPA kernel it lacks is counted by its ``sdpa_flop_count``. Every
other op by ``CONVENTION`` (one table, per family):

- element-wise: 1 FLOP per output element per arithmetic operation (+ - * /; a fused
  multiply-add such as addcmul counts 2). Special functions (sqrt, rsqrt, exp, log, tanh,
  sigmoid, erf, a non-integer power) count 0, as the book counts sqrt; comparisons, selects,
  max(x, 0) (relu), casts and copies count 0. silu = x * sigmoid(x) counts 1, gelu 4.
- reductions: 1 per input element (sum, mean, prod, max, min, amax, amin); var/std 3;
  a vector norm 2 (square, add).
- normalisation, per input element: layer/group norm 5 (mean, subtract, square, sum,
  scale) + 1 each for weight and bias; RMS norm 3 (square, sum, scale) + 1 for weight;
  batch norm in inference 2 (subtract, scale) + weight + bias, in training + 3 (statistics).
- softmax / log-softmax: 4 per element (max, subtract, sum, divide; exp not counted).
- copies and layout (clone, copy_, cast, cat, gather, embedding, fills): 0 FLOPs, their
  bytes placed by bandwidth.
- views (outputs that share an input's storage, nothing written): 0 FLOPs, 0 bytes.

Bytes of one op: the unique bytes of its inputs (read) plus those of its outputs (written),
each tensor's span in its storage; views of one storage are counted once (the union of
their spans), an input written in place is counted read and written, an ``out=`` buffer
written only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

FAMILIES = ("matmul/conv/attention", "normalisation", "element-wise", "reductions",
            "copies/layout", "views", "other")

MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm", "convolution",
          "_convolution", "conv2d", "conv1d", "conv3d", "_slow_conv2d_forward",
          "mkldnn_convolution", "convolution_overrideable", "cudnn_convolution",
          "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
          "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
          "_flash_attention_forward", "_efficient_attention_forward",
          "scaled_dot_product_attention"}
SDPA = {n for n in MATMUL if "attention" in n}
NORM = {"native_layer_norm": 5, "layer_norm": 5, "native_group_norm": 5, "group_norm": 5,
        "_fused_rms_norm": 3, "rms_norm": 3, "native_batch_norm": 2,
        "_native_batch_norm_legit": 2, "_native_batch_norm_legit_no_training": 2,
        "batch_norm": 2, "_softmax": 4, "softmax": 4, "_log_softmax": 4, "log_softmax": 4,
        "_safe_softmax": 4}
REDUCE = {"sum": 1, "mean": 1, "prod": 1, "max": 1, "min": 1, "amax": 1, "amin": 1,
          "argmax": 1, "argmin": 1, "var": 3, "std": 3, "var_mean": 3, "std_mean": 3,
          "linalg_vector_norm": 2, "norm": 2, "cumsum": 1, "logsumexp": 2}
# Arithmetic operations per output element of the element-wise ops; special functions,
# comparisons, selects and casts are 0 (the module doc).
ELEMENTWISE = {"add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "neg": 1, "addcmul": 2,
               "addcdiv": 2, "lerp": 2, "silu": 1, "gelu": 4, "square": 1, "reciprocal": 0,
               "sqrt": 0, "rsqrt": 0, "exp": 0, "exp2": 0, "log": 0, "log2": 0, "log1p": 0,
               "expm1": 0, "tanh": 0, "sigmoid": 0, "erf": 0, "sin": 0, "cos": 0, "abs": 0,
               "relu": 0, "threshold": 0, "clamp": 0, "clamp_min": 0, "clamp_max": 0,
               "hardtanh": 0, "where": 0, "masked_fill": 0, "maximum": 0, "minimum": 0,
               "eq": 0, "ne": 0, "lt": 0, "le": 0, "gt": 0, "ge": 0, "logical_not": 0,
               "sign": 0, "floor": 0, "ceil": 0, "round": 0, "trunc": 0, "bitwise_not": 0,
               "_to_copy": 0, "copy": 0, "fill": 0, "zero": 0, "tril": 0, "triu": 0,
               "pow": 0}
# The element-wise ops above that compute a special function: their cost is real but counted
# 0 FLOPs, so a bound at the roofs leaves it out.
SPECIAL = {"sqrt", "rsqrt", "exp", "exp2", "log", "log2", "log1p", "expm1", "tanh", "sigmoid",
           "erf", "sin", "cos", "pow", "gelu", "silu"}
COPIES = {"clone", "copy_", "copy", "_to_copy", "to", "contiguous", "cat", "stack",
          "index_select", "index", "gather", "scatter", "embedding", "fill_", "fill", "zero_",
          "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "randn", "rand",
          "normal_", "uniform_", "arange", "constant_pad_nd", "repeat", "flip", "roll",
          "tril", "triu", "_unsafe_index", "index_put_", "masked_scatter", "lift_fresh_copy",
          "new_zeros", "new_ones", "new_full", "new_empty_strided", "slice_scatter",
          "select_scatter", "as_strided_scatter", "split_with_sizes_copy", "_reshape_copy"}
ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "resize_"}

CONVENTION = {
    "matmul/conv/attention": "torch.utils.flop_counter's registry (2 per multiply-add); the "
                             "CPU SDPA kernel by its sdpa_flop_count (causal masks not "
                             "subtracted, as the registry)",
    "element-wise": "1 per output element per arithmetic op (+ - * /; FMA 2); sqrt, exp, "
                    "tanh, sigmoid, erf and other special functions 0; compare/select/cast 0",
    "reductions": "1 per input element (var/std 3, vector norm 2)",
    "normalisation": "per element: layer/group norm 5, RMS norm 3, batch norm 2 (+3 "
                     "training), +1 per weight/bias; softmax 4 (max, sub, sum, div; exp 0)",
    "copies/layout": "0 FLOPs: placed by bandwidth",
    "views": "0 FLOPs, 0 bytes (outputs share an input's storage, nothing written)",
    "other": "0 FLOPs: no convention for this op (named in the report)",
}


@dataclass(frozen=True)
class TensorMeta:
    """One tensor argument or result of a recorded op."""

    shape: tuple[int, ...]
    dtype: str  # torch's name without the prefix: float32, bfloat16, int64
    stride: tuple[int, ...]
    device: str
    storage: int  # the storage's identity within one recording (0, 1, ...)
    offset: int  # storage offset, in elements
    itemsize: int

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def span(self) -> tuple[int, int]:
        """The byte interval [lo, hi) of its storage this tensor touches."""
        if self.numel == 0:
            return (self.offset * self.itemsize, self.offset * self.itemsize)
        last = sum((n - 1) * abs(s) for n, s in zip(self.shape, self.stride, strict=True))
        lo = self.offset * self.itemsize
        return (lo, lo + (last + 1) * self.itemsize)

    def describe(self) -> str:
        dims = "x".join(map(str, self.shape)) or "scalar"
        contiguous = self.stride == _contiguous(self.shape)
        return f"{self.dtype}[{dims}]" + ("" if contiguous else f"s{list(self.stride)}")


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def storage_bytes(tensors: Iterable[TensorMeta]) -> list[int]:
    """Bytes of the union of the tensors' spans in each storage they touch (views counted
    once), in the order their storages first appear: the arrays an op streams."""
    by_storage: dict[int, list[tuple[int, int]]] = {}
    for t in tensors:
        lo, hi = t.span()
        if hi > lo:
            by_storage.setdefault(t.storage, []).append((lo, hi))
    out = []
    for spans in by_storage.values():
        spans.sort()
        total = 0
        cur_lo, cur_hi = spans[0]
        for lo, hi in spans[1:]:
            if lo > cur_hi:
                total += cur_hi - cur_lo
                cur_lo, cur_hi = lo, hi
            else:
                cur_hi = max(cur_hi, hi)
        out.append(total + cur_hi - cur_lo)
    return out


def union_bytes(tensors: Iterable[TensorMeta]) -> int:
    """Bytes of the union of the tensors' spans, storage by storage (views counted once)."""
    return sum(storage_bytes(tensors))


def family(packet: str, is_view: bool, pointwise: bool) -> str:
    """The op family of an aten op (its overload packet's name, e.g. 'mul')."""
    if is_view:
        return "views"
    if packet in MATMUL:
        return "matmul/conv/attention"
    if packet in NORM:
        return "normalisation"
    base = packet.rstrip("_")
    if packet in COPIES or base in ("_to_copy", "copy", "fill", "zero") or \
            packet in ALLOCATIONS:
        return "copies/layout"
    if packet in REDUCE:
        return "reductions"
    if pointwise or base in ELEMENTWISE:
        return "element-wise"
    return "other"


def convention_flops(packet: str, fam: str, inputs: list[TensorMeta],
                     outputs: list[TensorMeta], args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> tuple[int, str]:
    """(FLOPs, how they were counted) by the convention of the op's family; the caller tries
    torch's registry first. ``args``/``kwargs`` are the call's, tensors replaced by their
    ``TensorMeta`` (a scalar exponent or a weight of None is read from them)."""
    base = packet.rstrip("_")
    first_in = inputs[0].numel if inputs else 0
    first_out = outputs[0].numel if outputs else 0
    if fam in ("views", "copies/layout"):
        return 0, fam
    if fam == "element-wise":
        if base == "pow":
            exp = args[1] if len(args) > 1 else kwargs.get("exponent")
            per = (int(exp) - 1 if isinstance(exp, (int, float)) and float(exp).is_integer()
                   and exp >= 2 else 0)
            return per * first_out, f"pow: {per} per element" if per else "pow: special, 0"
        if base in ELEMENTWISE:
            per = ELEMENTWISE[base]
            if base in ("add", "sub") and kwargs.get("alpha", 1) not in (1, None):
                per += 1
            return per * first_out, f"element-wise: {per} per output element"
        return first_out, "element-wise (no entry): 1 per output element, assumed"
    if fam == "reductions":
        per = REDUCE[packet]
        return per * first_in, f"reduction: {per} per input element"
    if fam == "normalisation":
        per = NORM[packet]
        if packet in ("_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax"):
            return per * first_in, "softmax: 4 per element"
        weights = _affine_count(packet, args)
        if "batch_norm" in packet and _training(packet, args):
            per += 3
        return (per + weights) * first_in, f"normalisation: {per + weights} per element"
    return 0, "no convention: 0"


def _affine_count(packet: str, args: tuple[Any, ...]) -> int:
    """How many of weight and bias a normalisation call was given (args as recorded)."""
    at = {"native_layer_norm": (2, 3), "layer_norm": (2, 3), "native_group_norm": (1, 2),
          "group_norm": (2, 3), "_fused_rms_norm": (2,), "rms_norm": (2,),
          "native_batch_norm": (1, 2), "_native_batch_norm_legit": (1, 2),
          "_native_batch_norm_legit_no_training": (1, 2), "batch_norm": (1, 2)}.get(packet, ())
    return sum(1 for i in at if i < len(args) and isinstance(args[i], TensorMeta))


def _training(packet: str, args: tuple[Any, ...]) -> bool:
    if packet == "_native_batch_norm_legit_no_training":
        return False
    at = 5 if packet in ("native_batch_norm", "_native_batch_norm_legit", "batch_norm") else -1
    return bool(args[at]) if 0 <= at < len(args) and isinstance(args[at], bool) else False
