"""What `make gpu-check`'s two resumable steps (the pytest plug-in gpu_check_progress.py and
sanitize_kernels.py) agree on: the text of a sticky CUDA error, after which every later CUDA
call of the process fails, and the exit status that asks scripts/gpu_check.sh to start the
step again, in a fresh process, for what is not yet run."""

from __future__ import annotations

import re

RESUME = 75
STICKY = re.compile(r"illegal memory access|illegal address|unspecified launch failure"
                    r"|misaligned address|illegal instruction|device-side assert"
                    r"|CUDA_ERROR_(ILLEGAL|LAUNCH_FAILED|MISALIGNED|HARDWARE|ASSERT)"
                    r"|cudaError(IllegalAddress|LaunchFailure|MisalignedAddress|Assert"
                    r"|HardwareStackError|IllegalInstruction)", re.IGNORECASE)
