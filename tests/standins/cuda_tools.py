"""Test helpers for the CUDA sources: the pip CUDA toolchain, compiles cached per session,
ptxas resource reports and SASS listings.

Only the pip wheels of the ``cudatools`` extra are used (one pinned CUDA version across nvcc,
ptxas, nvrtc, cuobjdump and nvdisasm), never a system toolkit, so the resource reports and SASS
the tests check are the same on every machine.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from patience import patience
from roofbench.kernels import registry
from roofbench.kernels import wgmma_gemm as wg
from roofbench.kernels.cuda_impl import CUDA_DIR, cuda_include_dirs, load_source
from testpaths import ROOT

__all__ = ["cuda_include_dirs"]

ARCHS = ("sm_80", "sm_89", "sm_90")
_TMP = Path(tempfile.mkdtemp(prefix="roofbench-cubin-"))


def _site_dirs() -> list[Path]:
    dirs = [Path(p) for p in sys.path if p.endswith("site-packages")]
    with contextlib.suppress(AttributeError):  # old virtualenvs lack getsitepackages
        dirs += [Path(p) for p in site.getsitepackages()]
    return list(dict.fromkeys(dirs))


@cache
def pip_tool(name: str) -> Path | None:
    """A binary from the CUDA pip wheels (CUDA 13 layout nvidia/cu13/bin, CUDA 12 layout
    nvidia/cuda_<pkg>/bin), or None."""
    for sp in _site_dirs():
        for cand in (sp / "nvidia" / "cu13" / "bin" / name,
                     *sorted((sp / "nvidia").glob(f"cuda_*/bin/{name}"))):
            if cand.is_file():
                return cand
    return None


def missing_tools(*names: str) -> str | None:
    """A skip reason when a pip tool is missing."""
    absent = [n for n in names if pip_tool(n) is None]
    if absent:
        return (f"pip CUDA toolchain missing ({', '.join(absent)}): "
                "pip install -e '.[cudatools]'")
    return None


@dataclass
class Resources:
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack: int = 0
    smem: int = 0


@dataclass
class Compiled:
    source: str
    arch: str
    cubin: Path
    log: str
    resources: dict[str, Resources] = field(default_factory=dict)


_FUNC = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+a?)'")  # sm_90a too
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas(log: str) -> dict[str, Resources]:
    """Per-kernel resources from ``ptxas -v`` output."""
    out: dict[str, Resources] = {}
    cur: Resources | None = None
    for line in log.splitlines():
        if m := _FUNC.search(line):
            cur = out.setdefault(m.group(1), Resources())
        elif cur is not None and (m := _STACK.search(line)):
            cur.stack, cur.spill_stores, cur.spill_loads = map(int, m.groups())
        elif cur is not None and (m := _USED.search(line)):
            cur.registers = int(m.group(1))
            cur.smem = int(m.group(2) or 0)
    return out


@cache
def _tool_versions() -> str:
    """nvcc's and ptxas's own words on their versions: a kept cubin is theirs only."""
    tools = [tool for t in ("nvcc", "ptxas") if (tool := pip_tool(t)) is not None]
    return "".join(subprocess.run([str(tool), "--version"], capture_output=True, text=True,
                                  timeout=patience(60)).stdout for tool in tools)


def _nvcc_key(src: Path, folders: tuple[Path, ...], flags: tuple[str, ...]) -> str:
    """What a cubin and its ptxas report depend on: the source's bytes, every file of its own
    folder and of the include folders (by name and bytes, not path), the flags and the tools'
    versions."""
    import hashlib

    h = hashlib.sha256(src.read_bytes() + b"\0" + " ".join(flags).encode())
    for d in folders:
        for f in sorted(d.iterdir()):
            if f.is_file():
                h.update(f.name.encode() + b"\0" + f.read_bytes())
    h.update(_tool_versions().encode())
    return h.hexdigest()[:32]


def nvcc_cubin(src: Path, arch: str, out: Path, includes: tuple[Path, ...] = (),
               defines: tuple[str, ...] = ()) -> str:
    """pip's nvcc: ``src`` -> the cubin ``out`` for ``arch`` (``-Xptxas -v``); returns the
    ptxas report. Kept between sessions in the test store's ``nvcc/`` by its inputs
    (``_nvcc_key``; ``RB_TEST_STORE=off`` always compiles): most of the CUDA compile tests'
    time on two cores was nvcc recompiling what no edit had touched."""
    flags = ("-cubin", f"-arch={arch}", "-std=c++17", "-Xptxas", "-v",
             *(f"-D{d}" for d in defines))
    return nvcc_kept(src, flags, out, includes, ".cubin")


def nvcc_kept(src: Path, flags: tuple[str, ...], out: Path, includes: tuple[Path, ...] = (),
              suffix: str = ".cubin") -> str:
    """pip's nvcc with ``flags`` (and ``-I`` each of ``includes``): ``src`` -> ``out``;
    returns nvcc's output. Kept in the test store's ``nvcc/`` by ``_nvcc_key`` (the output as
    ``<key><suffix>``, its log beside it), as ``nvcc_cubin`` describes."""
    import os

    from codegen_store import folder, prune

    nvcc = pip_tool("nvcc")
    assert nvcc is not None, missing_tools("nvcc")
    store = folder("nvcc")
    hit = (store / _nvcc_key(src, (src.parent, *includes), flags)
           if store is not None else None)
    if hit is not None and hit.with_suffix(suffix).is_file() \
            and hit.with_suffix(".log").is_file():
        for kept in (suffix, ".log"):
            os.utime(hit.with_suffix(kept))  # used: kept by codegen_store.prune
        shutil.copyfile(hit.with_suffix(suffix), out)
        return hit.with_suffix(".log").read_text()
    cmd = [str(nvcc), *flags, *(a for d in includes for a in ("-I", str(d))), str(src),
           "-o", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=patience(300))
    log = p.stdout + p.stderr
    if p.returncode != 0:
        raise AssertionError(f"nvcc failed for {src.name} {' '.join(flags)}:\n{log}")
    if hit is not None:
        hit.parent.mkdir(parents=True, exist_ok=True)
        tmp = hit.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(log)
        os.replace(tmp, hit.with_suffix(".log"))
        shutil.copyfile(out, tmp)  # the output last: a hit needs both
        os.replace(tmp, hit.with_suffix(suffix))
        prune(hit.parent)
    return log


def gxx_kept(src: Path, flags: tuple[str, ...], includes: tuple[Path, ...], out: Path,
             build: Callable[[], None]) -> None:
    """``out`` as ``build()`` writes it (g++'s object of ``src`` with ``flags``, its quoted
    includes found beside it, then in ``includes``), taken from the test store's ``emu/``
    where an earlier session kept it, else built and kept. Keyed by ``build_key`` (the bytes
    of the source and of what it includes, never their paths), g++'s version and the NVIDIA
    wheels' (the toolkit and CUTLASS headers it may include with <...>).
    ``RB_TEST_STORE=off``: always built."""
    import os

    from codegen_store import folder, prune

    store = folder("emu")
    key = build_key(src, (*flags, _gxx_version(), nvidia_versions()), includes)
    hit = store / f"{key}{out.suffix or '.bin'}" if store is not None else None
    if hit is not None and hit.is_file():
        os.utime(hit)  # used: kept by codegen_store.prune
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        shutil.copy2(hit, tmp)  # the mode too: a program stays executable
        os.replace(tmp, out)
        return
    build()
    if hit is not None:
        tmp = hit.with_suffix(f".{os.getpid()}.tmp")
        try:
            shutil.copy2(out, tmp)
            os.replace(tmp, hit)
        except OSError:  # a full disk, a store made read-only since: the build stands
            with contextlib.suppress(OSError):
                tmp.unlink()
            return
        prune(hit.parent)


@cache
def nvidia_versions() -> str:
    """The installed NVIDIA wheels and their versions (the CUDA headers, CCCL, CUTLASS): what
    a host build against their headers depends on besides the tree's files."""
    import importlib.metadata as md

    return " ".join(sorted(f"{d.metadata['Name']}=={d.version}" for d in md.distributions()
                           if (d.metadata["Name"] or "").lower().startswith("nvidia")))


@cache
def compile_cu(source: str, arch: str) -> Compiled:
    """nvcc (pip) -> cubin for one arch, with the ptxas resource report. Cached per session,
    and between sessions by ``nvcc_cubin``."""
    out = _TMP / f"{Path(source).stem}.{arch}.cubin"
    log = nvcc_cubin(CUDA_DIR / source, arch, out, (CUDA_DIR,))
    return Compiled(source, arch, out, log, parse_ptxas(log))


def compile_all(sources: list[str], archs: tuple[str, ...] = ARCHS) -> list[Compiled]:
    """Every (source, arch), two compiles at a time (CI has 2 cores)."""
    jobs = [(s, a) for s in sources for a in archs]
    with ThreadPoolExecutor(max_workers=2) as ex:
        return list(ex.map(lambda j: compile_cu(*j), jobs))


def sass_listing(cubin: Path) -> str:
    """``cuobjdump -sass`` (pip) of a cubin, kept in the test store's ``nvcc/`` by the cubin's
    bytes (compressed: the kernels' listings are tens of MB, and the tool's minutes on two
    cores were most of the SASS tests' time)."""
    import gzip
    import hashlib
    import os

    from codegen_store import folder

    store = folder("nvcc")
    hit = (store / (hashlib.sha256(cubin.read_bytes()).hexdigest()[:32] + ".sass.gz")
           if store is not None else None)
    if hit is not None and hit.is_file():
        with contextlib.suppress(OSError, EOFError, gzip.BadGzipFile):
            text = gzip.decompress(hit.read_bytes()).decode()
            os.utime(hit)  # used: kept by codegen_store.prune
            return text
    cuobjdump = pip_tool("cuobjdump")
    assert cuobjdump is not None, missing_tools("cuobjdump")
    text = subprocess.run([str(cuobjdump), "-sass", str(cubin)], capture_output=True,
                          text=True, timeout=patience(120), check=True).stdout
    if hit is not None:
        hit.parent.mkdir(parents=True, exist_ok=True)
        tmp = hit.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(gzip.compress(text.encode(), compresslevel=1))
        os.replace(tmp, hit)
    return text


@cache
def sass(source: str, arch: str) -> dict[str, str]:
    """SASS text per kernel of a compiled source (cuobjdump -sass, pip)."""
    parts = re.split(r"^.*Function : (\S+)\n", sass_listing(compile_cu(source, arch).cubin),
                     flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


_OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


def opcodes(sass_text: str) -> list[str]:
    """Full opcodes (with modifiers) of a SASS listing, in order."""
    return _OPCODE.findall(sass_text)


def nvrtc_compile(source: str, arch: str) -> tuple[bool, str, int]:
    """Compile the expanded source with NVRTC (the library CuPy's RawModule uses) through
    cuda-bindings: (ok, log, cubin size). A success is kept in the test store's ``nvcc/`` by
    what it was compiled from (the expanded text, the options, NVRTC's version and the NVIDIA
    wheels' whose headers it includes): compiling the kernels again each session was most of
    the NVRTC test's time."""
    import hashlib
    import os

    from codegen_store import digest, folder, read_verified
    from cuda.bindings import nvrtc

    text = load_source(source).encode()
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17"]
    _, major, minor = nvrtc.nvrtcVersion()
    store = folder("nvcc")
    hit = (store / (hashlib.sha256(b"\0".join([text, *opts, f"{major}.{minor}".encode(),
                                               nvidia_versions().encode()])).hexdigest()[:32]
                    + ".nvrtc.json") if store is not None else None)
    if hit is not None and (found := read_verified(hit)) is not None:
        ok, log, size = found[0]
        return bool(ok), str(log), int(size)
    got = _nvrtc_compile(source, text, opts)
    if hit is not None and got[0]:  # a failure is never kept: the next session compiles
        tmp = hit.with_suffix(f".{os.getpid()}.tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps({"value": list(got), "sha256": digest(list(got))}))
            os.replace(tmp, hit)
    return got


def _nvrtc_compile(source: str, text: bytes, opts: list[bytes]) -> tuple[bool, str, int]:
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(text, source.encode(), 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
    opts = [*opts, *(f"-I{d}".encode() for d in cuda_include_dirs())]
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, n = nvrtc.nvrtcGetProgramLogSize(prog)
        log = bytearray(n)  # never b" " * n: n == 1 is CPython's shared b" ", NUL-filled
        nvrtc.nvrtcGetProgramLog(prog, log)
        size = 0
        if err == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetCUBINSize(prog)
        return (err == nvrtc.nvrtcResult.NVRTC_SUCCESS,
                bytes(log).rstrip(b"\0").decode(errors="replace"), int(size))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


EMU_DIR = Path(__file__).resolve().parent / "cuda_emu"
EMU_HEADER = EMU_DIR / "emu.h"
# The runtime-launched sources of every workload's CUDA table (the registry's, a new
# workload's included) and the cache probe's.
EMU_SOURCES = (*registry.cuda_sources("runtime"), "cache.cu")
PROBE_DIR = ROOT / "roofs" / "probes" / "cuda"


@dataclass(frozen=True)
class DriverSource:
    """A source launched through the driver (cuLaunchKernel with a parameter array): built
    with an rb_params__<kernel> entry per kernel, as $RB_EMU_LIBDIR/driver_<stem>.so."""

    path: Path
    kernels: tuple[str, ...]

    @property
    def stem(self) -> str:
        return self.path.stem


def driver_sources() -> dict[str, DriverSource]:
    """The sm_90a sources and their kernels, named from the tables that launch them (and the
    emulation's own unit kernels)."""
    from roofbench.roofs.probes.gpu_math import WGMMA_KERNELS

    gemm = [f"gemm_wgmma_{d}" for d in wg.TmaKernel(wg.WGMMA_SOURCE, "").dtypes]
    unit = ("unit_wait", "unit_phase", "unit_tma", "unit_mbar_misuse", "unit_wgmma",
            "unit_poison", "unit_two_blocks", "unit_race", "unit_shfl", "unit_block_sum_twice",
            "unit_deadlock")
    return {"gemm_wgmma": DriverSource(CUDA_DIR / wg.WGMMA_SOURCE, tuple(gemm)),
            "wgmma": DriverSource(PROBE_DIR / "wgmma.cu",
                                  tuple(k for k, _ in WGMMA_KERNELS.values())),
            "hopper_unit": DriverSource(EMU_DIR / "hopper_unit.cu", unit)}


def emulation_missing() -> str | None:
    """A skip reason when the host emulation cannot be built here."""
    import platform

    if shutil.which("g++") is None:
        return "g++ not found (the CUDA host emulation is built with it)"
    if platform.machine() not in ("x86_64", "AMD64"):
        return "the emulated launcher assumes the x86-64 calling convention"
    if not cuda_include_dirs():
        return "CUDA headers (cuda_fp16.h) not found: pip install -e '.[cudatools]'"
    return None


def needs_emulation() -> pytest.MarkDecorator:
    """The mark of a test (or a module's ``pytestmark``) that runs under the host emulation:
    skipped with emulation_missing's reason where it cannot be built."""
    return pytest.mark.skipif(emulation_missing() is not None, reason=emulation_missing() or "")


def _source_path(src: str) -> Path:
    """A kernel source (kernels/cuda) or a probe source (roofs/probes/cuda)."""
    return CUDA_DIR / src if (CUDA_DIR / src).is_file() else PROBE_DIR / src


# The emulated build instruments every load and store of the kernel code: g++ calls
# tests/standins/cuda_emu/checks.h's callbacks (bounds of the global buffers, races and proxy
# fences in shared memory). -fsanitize=thread's instrumentation keeps every access (no check
# dropped as redundant); the object is linked without the sanitizer's runtime.
EMU_CHECK_FLAGS = ("-fsanitize=thread", "--param", "tsan-instrument-func-entry-exit=0")
_SHARED = re.compile(r"__rb_shared__\s+((?:__attribute__\s*\(\([^;]*?\)\)\s*)*)"
                     r"([^;{}()]+?)\s+(\w+)\s*((?:\[[^\];]*\]\s*)+);")


def rewrite_shared(text: str) -> str:
    """Every ``__shared__ T name[dims];`` of preprocessed emulated source (emu.h spells
    __shared__ as the marker __rb_shared__) as a reference to the block's own array in its
    shared window: ``static RbSharedKey k; auto& name = rb_shared<T[dims]>(k, "name");``."""
    def one(m: re.Match[str]) -> str:
        _, typ, name, dims = m.groups()
        return (f"static RbSharedKey rb_shk_{name}; auto& {name} = "
                f"rb_shared<{typ.strip()} {dims.strip()}>(rb_shk_{name}, \"{name}\");")
    return _SHARED.sub(one, text)


_KERNEL = re.compile(r'extern\s+"C"\s+void\s+(\w+)\s*\(')


def with_signatures(text: str) -> str:
    """Preprocessed emulated source with an ``rb_sig__<name>()`` after it for every ``extern
    "C"`` kernel it defines (emu.h rb_signature: the parameter types the compiled function
    has): what the launchers check each scalar against (emu_launch.check_scalars)."""
    names = dict.fromkeys(n for n in _KERNEL.findall(text)
                          if not n.startswith(("rb_", "__")))
    return text + "".join(f'\nextern "C" const char* rb_sig__{n}() {{ return rb_signature({n}); }}'
                          for n in names) + "\n"


_QUOTED = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)


def included_headers(src: Path, includes: tuple[Path, ...] = ()) -> list[Path]:
    """The quoted includes of ``src``, transitively, found as g++ finds them: beside the file
    that includes them first, then the ``includes`` folders, kernels/cuda and the emulation's
    folder (the -I order of _emu_compile). An include that none holds (a toolkit header) is
    left out."""
    seen: dict[Path, None] = {}
    todo = [src]
    while todo:
        f = todo.pop()
        for name in _QUOTED.findall(f.read_text()):
            for base in (f.parent, *includes, CUDA_DIR, EMU_DIR):
                inc = (base / name).resolve()
                if inc.is_file():
                    if inc not in seen and inc != src.resolve():
                        seen[inc] = None
                        todo.append(inc)
                    break
    return list(seen)


def build_key(src: Path, flags: tuple[str, ...], includes: tuple[Path, ...] = ()) -> str:
    """What an emulated build depends on: the source and the headers it includes, transitively,
    as found through ``includes`` first (by name and bytes, not path: a fresh clone's or a
    mutant's temporary folder takes the builds kept by an earlier one; a header the source
    does not include cannot change its build, so a mutant of mma.cuh rebuilds only what
    includes it), every file of the emulation's folder (emu.h is forced in), the flags."""
    import hashlib

    text = src.read_text()
    h = hashlib.sha256(re.sub(r'#include "/[^"]+"', "#include", text).encode())
    for f in sorted(included_headers(src, includes), key=lambda f: (f.name, f.read_bytes())):
        h.update(b"\0inc\0" + f.name.encode() + b"\0" + f.read_bytes())
    for f in sorted(EMU_DIR.iterdir()):
        if f.suffix in (".cuh", ".h", ".cpp"):
            h.update(f.name.encode() + f.read_bytes())
    h.update(" ".join(flags).encode())
    return h.hexdigest()[:32]


@cache
def _gxx_version() -> str:
    """g++'s own words on its version: a kept build is g++'s of that version only."""
    gxx = shutil.which("g++")
    if gxx is None:
        return "no g++"
    return subprocess.run([gxx, "--version"], capture_output=True, text=True).stdout


def emu_build_key(src: Path, opt: str, extra: tuple[str, ...] = (), after: tuple[str, ...] = (),
                  includes: tuple[Path, ...] = ()) -> str:
    """_emu_compile's key: ``build_key`` of the source with its flags, the names of what it
    is linked with (their sources are the emulation's folder's) and g++'s version. The
    include folders count by what the source finds in them, never by their paths: a planted
    bug built in a session's temporary folder takes the build an earlier session kept."""
    return build_key(src, (opt, *extra, *(Path(a).name for a in after), _gxx_version()),
                     includes)


def _emu_compile(src: Path, so: Path, opt: str, extra: tuple[str, ...] = (),
                 after: tuple[str, ...] = (), includes: tuple[Path, ...] = ()) -> None:
    """g++ against the emulation: preprocessed, ``__shared__`` rewritten into the block's
    window, compiled with the checks' instrumentation (EMU_CHECK_FLAGS) or, for a counting
    build (``extra`` with -fsanitize=kernel-address, g++ takes one of the two), with the byte
    counters', then linked with ``after``. A build whose inputs are unchanged is taken from
    $RB_EMU_CACHE (a folder; scripts/mutate_cuda.py sets it), else from the test store's
    (codegen_store: kept between sessions unless RB_TEST_STORE=off)."""
    import os

    from codegen_store import folder, prune

    cache = os.environ.get("RB_EMU_CACHE") or folder("emu")
    key = emu_build_key(src, opt, extra, after, includes)
    hit = Path(cache) / f"{key}.so" if cache else None
    if hit is not None and hit.is_file():  # a new file: `so` may be loaded (never rewrite it)
        os.utime(hit)  # used: kept by codegen_store.prune
        tmp = so.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(hit, tmp)
        os.replace(tmp, so)
        return
    gxx = shutil.which("g++") or "g++"
    counting = any(f.startswith("-fsanitize=kernel-address") for f in extra)
    defines = tuple(f for f in extra if f.startswith(("-D", "-I")))
    flags = ["-std=c++20", "-pthread", *(f"-I{d}" for d in includes),
             *(f"-I{d}" for d in cuda_include_dirs()), f"-I{CUDA_DIR}", f"-I{EMU_DIR}",
             *defines]
    instrument = extra if counting else (*extra, *EMU_CHECK_FLAGS)
    pre = so.with_suffix(".ii")
    p = subprocess.run([gxx, "-E", *flags, "-include", str(EMU_HEADER), "-x", "c++", str(src),
                        "-o", str(pre)], capture_output=True, text=True, timeout=patience(600))
    if p.returncode == 0:
        pre.write_text(with_signatures(rewrite_shared(pre.read_text())))
        obj = so.with_suffix(".o")
        p = subprocess.run([gxx, *flags, opt, "-c", "-fPIC", "-w", "-Wno-psabi", *instrument,
                            "-x", "c++-cpp-output", str(pre), "-o", str(obj)],
                           capture_output=True, text=True, timeout=patience(600))
    if p.returncode == 0:
        p = subprocess.run([gxx, "-shared", "-pthread", str(obj), *after, "-o", str(so)],
                           capture_output=True, text=True, timeout=patience(600))
    if p.returncode != 0:
        raise AssertionError(f"emulation build of {src.name} failed:\n{p.stderr[-4000:]}")
    if hit is not None:
        hit.parent.mkdir(parents=True, exist_ok=True)
        tmp = hit.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(so, tmp)
        os.replace(tmp, hit)
        prune(hit.parent)


def build_driver_source(ds: DriverSource, out: Path, text: str | None = None,
                        defines: tuple[str, ...] = ("RB_BOUNDED_WAIT",), opt: str = "-O2",
                        extra: tuple[str, ...] = (), after: tuple[str, ...] = ()) -> Path:
    """driver_<stem>.so in ``out``: the source (or ``text``, e.g. a mutant of it, with its
    kernels/cuda includes already inlined) with the driver entries of its kernels, built as
    the check build (-DRB_BOUNDED_WAIT) by default."""
    out.mkdir(parents=True, exist_ok=True)
    body = ds.path
    if text is not None:
        body = out / f"{ds.stem}.mutant.cu"
        body.write_text(text)
    wrapper = out / f"driver_{ds.stem}.cpp"
    wrapper.write_text(f'#include "{body}"\n' + "".join(f"RB_ENTRY({k})\n" for k in ds.kernels))
    so = out / f"driver_{ds.stem}.so"
    _emu_compile(wrapper, so, opt, (*(f"-D{d}" for d in defines), *extra), after)
    return so


@cache
def build_emulated(src: str) -> Path:
    """One source's check build, <stem>.so in build_emulation's folder: what a test that
    launches only its kernels needs (a narrow selection, a mutant's, builds one source)."""
    out = _TMP / "emu"
    out.mkdir(exist_ok=True)
    so = out / (Path(src).stem + ".so")
    _emu_compile(_source_path(src), so, "-O1")
    return so


@cache
def build_driver_emulated(stem: str) -> Path:
    """One driver-launched source's check build, driver_<stem>.so in build_emulation's
    folder (a test of the unit kernels needs no GEMM built)."""
    out = _TMP / "emu"
    out.mkdir(exist_ok=True)
    return build_driver_source(driver_sources()[stem], out)


@cache
def build_emulation() -> Path:
    """The CUDA C sources compiled by g++ against tests/standins/cuda_emu/emu.h, one shared
    library per
    source, in a session temp dir (cached): the RawModule kernels (<stem>.so, launched with
    rb_launch) and the driver-launched sm_90a ones (driver_<stem>.so). Returns the directory."""
    out = _TMP / "emu"
    out.mkdir(exist_ok=True)
    jobs = [lambda s=src: build_emulated(s) for src in EMU_SOURCES]
    jobs += [lambda s=stem: build_driver_emulated(s) for stem in driver_sources()]
    with ThreadPoolExecutor(max_workers=2) as ex:
        list(ex.map(lambda j: j(), jobs))
    return out


# ------------------------------------------------------------------ bytes counted
# The emulation built with GCC's outline AddressSanitizer instrumentation and the counters of
# cuda_emu/bytes_count.cpp (its header says how): every global load and store a launch executes,
# per watched buffer. The model-versus-counters check of `--ncu` (roofbench/ncu_checks.py),
# without a GPU. tests/kernels/test_emu_bytes.py holds it against the declarations.
# -fno-tree-sra keeps an aggregate's copy (a float4 or uint4 load) one access of its width, as
# the GPU issues it, so that its alignment is checked too.
COUNT_FLAGS = ("-fsanitize=kernel-address", "--param", "asan-instrumentation-with-call-threshold=0",
               "--param", "asan-stack=0", "--param", "asan-globals=0", "-fno-tree-sra")


@cache
def _counting_runtime() -> Path:
    """The counters' object, once a session (kept in the store by gxx_kept): every counting
    build links this one, wherever the build itself is made."""
    out = _TMP / "counting-runtime"
    out.mkdir(exist_ok=True)
    obj = out / "bytes_count.o"
    src = EMU_DIR / "bytes_count.cpp"
    flags = ("-std=c++20", "-O2", "-fPIC", "-c")
    cmd = [shutil.which("g++") or "g++", *flags, str(src), "-o", str(obj)]
    gxx_kept(src, flags, (), obj, lambda: subprocess.run(cmd, check=True,
                                                          capture_output=True, timeout=300))
    return obj


def build_counting(src: str | Path, out: Path | None = None, text: str | None = None) -> Path:
    """The byte-counting build of one source: a kernels/cuda or roofs/probes/cuda file name
    (launched with rb_launch), or a DriverSource's path (sm_90a: launched with
    rb_launch_params through its rb_params__ entries). ``text`` replaces the source (a
    planted change). Returns the shared library."""
    out = out or _TMP / "counting"
    out.mkdir(parents=True, exist_ok=True)
    rt = ("-x", "none", str(_counting_runtime()))
    ds = next((d for d in driver_sources().values() if d.path == Path(src)), None)
    stem = Path(src).stem
    if ds is not None:
        return build_driver_source(ds, out, text, opt="-O1", extra=COUNT_FLAGS, after=rt)
    path = _source_path(str(src))
    if text is not None:
        path = out / f"{stem}.changed.cu"
        path.write_text(text)
    so = out / f"count_{stem}.so"
    _emu_compile(path, so, "-O1", COUNT_FLAGS, after=rt)
    return so


@dataclass(frozen=True)
class Traffic:
    """What one launch moved through one buffer: bytes read and written, the number of load
    and store instructions (an access of 16 bytes is one), and how many accesses were not
    aligned to their width (a fault on the GPU)."""

    read: int
    written: int
    loads: int = 0
    stores: int = 0
    misaligned: int = 0


class ByteCounter:
    """The counters of a counting build (``build_counting``): ``watch`` the buffers by name,
    then ``count(launch)`` runs a launch and returns each buffer's Traffic. The watched
    buffers are also registered for the emulation's check of that launch (checks.h
    rb_emu_check_access: a misaligned access inside one fails before it is made), except the
    ranges named ``<buffer>:<where>`` (guard bytes around a buffer: counted, an access to them
    is out of bounds)."""

    def __init__(self, lib: Any) -> None:
        import ctypes

        self.lib = lib
        lib.rb_bytes_watch.restype = ctypes.c_int
        lib.rb_bytes_watch.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
        self.names: list[str] = []
        self.buffers: dict[str, Any] = {}

    def watch(self, buffers: dict[str, Any]) -> None:
        """Watch these buffers (numpy arrays), replacing any watched before."""
        self.lib.rb_bytes_unwatch_all()
        self.names = []
        self.buffers = {n: a for n, a in buffers.items() if ":" not in n}
        for name, a in buffers.items():
            if self.lib.rb_bytes_watch(a.ctypes.data, a.nbytes) < 0:
                raise ValueError("at most 32 buffers can be watched")
            self.names.append(name)

    def count(self, launch: Any) -> dict[str, Traffic]:
        import ctypes

        self.lib.rb_bytes_clear()
        for name, a in list(self.buffers.items())[:32]:
            self.lib.rb_emu_buffer(ctypes.c_ulonglong(a.ctypes.data), ctypes.c_ulonglong(a.nbytes),
                                   a.itemsize, name.encode())
        launch()
        v = (ctypes.c_ulonglong * (5 * len(self.names)))()
        self.lib.rb_bytes_get(v, len(self.names))
        return {n: Traffic(*v[5 * i:5 * i + 5]) for i, n in enumerate(self.names)}
