"""What a rank learns from its environment: MPI itself, the launcher, its local rank, its GPU."""

from __future__ import annotations

import os
import re
from typing import Any

from roofbench.errors_text import first_line

from ..errors import UserError

# Environment variables that give a rank's index on its node, by launcher.
LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                   "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID", "LOCAL_RANK")


def import_mpi() -> Any:
    """mpi4py's MPI module, or one clear UserError saying what is missing."""
    try:
        import mpi4py
    except ImportError:
        raise UserError("MPI is not available: mpi4py is not installed. Install an MPI library "
                        "(Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev) and "
                        "`pip install 'roofbench[mpi]'`, then start with `mpirun -n N roofbench "
                        "fleet ...` (or `srun -n N ...` under Slurm)") from None
    try:
        from mpi4py import MPI
    except Exception as e:  # the wheel is there but no libmpi can be loaded or initialised
        msg = first_line(e, typed=False)
        raise UserError(f"MPI is not available: mpi4py {mpi4py.__version__} cannot load or "
                        f"start an MPI library ({msg}); install openmpi-bin (or another MPI) "
                        f"and start with mpirun/srun") from None
    return MPI


def launcher() -> str:
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        return "mpirun (Open MPI)"
    if "SLURM_STEP_ID" in env and "SLURM_PROCID" in env:
        return "srun (Slurm)"
    if "PMI_RANK" in env or "PMI_SIZE" in env:
        return "PMI (MPICH hydra or similar)"
    return "none (singleton: started without mpirun/srun)"


def env_local_rank() -> tuple[int | None, str]:
    for var in LOCAL_RANK_VARS:
        v = os.environ.get(var)
        if v is not None and v.strip().isdigit():
            return int(v), var
    return None, ""


def visible_gpus() -> list[str]:
    """GPU ids this process may use, without initialising CUDA (CUDA_VISIBLE_DEVICES wins,
    else the /dev/nvidiaN device files)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return [d.strip() for d in cvd.split(",") if d.strip() and d.strip() != "-1"]
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    return sorted((n[len("nvidia"):] for n in names if re.fullmatch(r"nvidia\d+", n)), key=int)


def assign_gpu(local_rank: int, host: str, rank: int) -> tuple[str | None, str | None]:
    """Pin this rank to one GPU by its local rank: (device id, None) or (None, why not).

    One visible GPU means the scheduler already gave this task its own (srun --gpus-per-task);
    several mean one per local rank. Must run before anything initialises CUDA."""
    devs = visible_gpus()
    if not devs:
        return None, (f"rank {rank} (host {host}, local rank {local_rank}) cannot see a GPU: "
                      "no CUDA device visible (CUDA_VISIBLE_DEVICES empty or no /dev/nvidiaN)")
    if len(devs) == 1:
        pick = devs[0]
    elif local_rank < len(devs):
        pick = devs[local_rank]
    else:
        return None, (f"rank {rank} (host {host}, local rank {local_rank}) cannot see a GPU: "
                      f"the host has {len(devs)} visible GPU(s) and local ranks 0-"
                      f"{len(devs) - 1} take them; start at most one rank per GPU")
    os.environ["CUDA_VISIBLE_DEVICES"] = pick
    return pick, None


def gpu_backend(name: str) -> bool:
    """Whether the backend ``name`` runs on a GPU (Backend.kind; its class is looked up, no
    device is touched: this runs before a rank is pinned to its GPU)."""
    from ..backends.base import BackendUnavailable, backend_class

    try:
        return backend_class(name).kind == "gpu"
    except (KeyError, BackendUnavailable):
        return False


def roofbench_version() -> str:
    import roofbench  # read at call time: a test may stand in another version

    return str(roofbench.__version__)
