"""``--compile``: the same program under ``torch.compile`` (inductor), timed with the same
clock, placed beside the eager program.

Inductor's generated kernels run below the dispatcher, so they cannot be recorded op by op:
the generated code is read (``run_and_get_code``) for the kernels it made (their names, and
the library calls it kept, such as mm), and the compiled program's bytes are the model's —
the eager bytes less what each fusion group saves (its eager bytes minus its fused bytes) —
beside the compiled program's measured time. Its FLOPs are the eager count. The arrow eager
-> compiled on the plot is the program's; the report puts each group's predicted bound
(bytes ratio, time at the roof) beside the measured speedup of the program.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from roofbench.errors_text import first_line
from roofbench.records import CaseResult
from roofbench.timing import TimerConfig

from .callables import Clock

if TYPE_CHECKING:
    from .profile import Profile

_KERNEL = re.compile(r"\b((?:cpp|triton)_\w*fused\w*|triton_\w+)\s*=\s*async_compile")
_EXTERN = re.compile(r"extern_kernels\.(\w+)")


@dataclass
class Compiled:
    case: CaseResult | None  # the compiled program, placed (None: it did not compile)
    kernels: list[str] = field(default_factory=list)  # generated kernels
    extern: list[str] = field(default_factory=list)  # library calls kept (mm, convolution)
    compile_s: float = 0.0  # the first call: tracing, code generation, the C++ build
    error: str | None = None
    eager_bytes: int = 0
    fused_bytes: int = 0  # the model's bytes of the compiled program

    @property
    def bytes_ratio(self) -> float | None:
        return self.eager_bytes / self.fused_bytes if self.fused_bytes else None


def generated_kernels(code: list[str]) -> tuple[list[str], list[str]]:
    """(the kernels inductor generated, the library calls it kept) in its output code."""
    kernels: list[str] = []
    extern: list[str] = []
    for src in code:
        for k in _KERNEL.findall(src):
            if k not in kernels:
                kernels.append(k)
        extern += _EXTERN.findall(src)
    return kernels, sorted(set(extern))


def compile_program(prof: Profile, fn: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any], clock: Clock, cfg: TimerConfig) -> Compiled:
    import torch
    from torch._inductor.utils import run_and_get_code

    from .profile import place, program_case

    saved = sum(g.count * (g.eager_bytes - g.fused_bytes) for g in prof.groups)
    eager_bytes = prof.program.bytes.get("dram", 0)
    out = Compiled(None, eager_bytes=eager_bytes, fused_bytes=eager_bytes - saved)
    compiled = torch.compile(fn)
    t0 = time.perf_counter()
    try:
        _, code = run_and_get_code(compiled, *args, **kwargs)
    except Exception as e:  # no compiler, an op inductor refuses: said, the eager stands
        out.error = first_line(e)
        return out
    out.compile_s = time.perf_counter() - t0
    out.kernels, out.extern = generated_kernels(list(code))
    gpu = clock.kind == "gpu"
    case = program_case(prof.recording, clock, gpu, "compiled", bytes_total=out.fused_bytes)
    case.extra.update(kernels=out.kernels, library_calls=out.extern,
                      bytes_model="eager bytes less each fusion group's saving",
                      compile_s=out.compile_s)
    place(case, clock.time(lambda: compiled(*args, **kwargs), cfg), prof.roofs)
    out.case = case
    return out
