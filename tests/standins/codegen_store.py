"""The codegen matrix's facts kept between test sessions, keyed by everything they come from.

Compiling the kernels for every target of the matrix is most of a `make test` on two cores
(the fan-out about 470 CPU seconds, the FMA-probe rows about 120: docs/tests.md), and the
facts are a pure function of: the code numba compiles (every ``.py`` under ``kernels/``,
``roofs/`` and ``roofbench/``, the stand-ins here that pick and read it, the child that
compiles it), numba's, llvmlite's,
NumPy's and Python's versions, this host's CPU as LLVM names it (the host row), the ``NUMBA_``
settings of the session, and the call's own arguments. A session whose key matches one
already computed reads its facts from ``$RB_TEST_STORE/codegen`` (default the per-user
cache folder, ``~/.cache/roofbench/test-store``); any change to those inputs compiles afresh.
The emulated CUDA builds are kept beside them, in ``emu/``, and nvcc's cubins, ptxas reports
and SASS listings in ``nvcc/``, each by its own inputs (cuda_tools: ``_emu_compile``,
``nvcc_cubin``, ``sass_listing``). ``RB_TEST_STORE=off`` always compiles (a doubt, or a
measure of a fresh machine).

A store is an optimisation, never a source of truth: a folder that cannot be made or written
(a read-only mount, a read-only home) is no store (``folder`` gives None: every caller
computes), any read or write error falls back to computing, and a kept value is returned only
when the digest stored beside it matches it (a hand-edited or half-written entry is computed
again and rewritten).

Narrower than "every source": a computation whose child processes say which files they loaded
(``record_loaded``, called by codegen_matrix at import: every compiling child imports it) is
kept with that list, each file's digest and each of their folders' ``.py`` names
(``loaded_sources``), and read back while those still match, whatever else moved. An edit of
the CLI or the gate, which no compiling child imports, then costs no fan-out (about 470 CPU
seconds); an edit of a loaded file, or a module added beside one (a registry that lists its
folder), computes afresh. Python that a process did not load cannot change what it compiled.
A child that cannot write its list fails, so a list is never short."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("kernels", "roofs", "roofbench", "tests/standins", "tests/roofs/codegen_child.py")
ENV = "RB_TEST_STORE"
LOADED_ENV = "RB_STORE_LOADED"  # where a compiling child writes the files it loaded
_computing = threading.local()  # .loaded: that folder, while ``kept`` computes in this thread


def folder(part: str = "codegen") -> Path | None:
    """Where ``part`` of the store is kept ("codegen": these facts; "emu": the emulated CUDA
    builds, tests/standins/cuda_tools.py), or None (``RB_TEST_STORE=off``)."""
    given = os.environ.get(ENV, "")
    if given.lower() in ("off", "0", "no"):
        return None
    if given:
        where = Path(given) / part
    else:
        from platformdirs import user_cache_dir

        where = Path(user_cache_dir("roofbench", appauthor=False)) / "test-store" / part
    return where if usable(where) else None


def usable(where: Path) -> bool:
    """Whether ``where`` is (or can be made) a folder this process can write: a read-only
    mount, a read-only home or a path under a file is no store."""
    try:
        where.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError):
        return False
    return os.access(where, os.W_OK | os.X_OK)


def digest(value: Any) -> str:
    """The digest a kept value is stored with (of its canonical JSON)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def sources_digest(root: Path = ROOT) -> str:
    """One digest of every source file the compiled facts can depend on (path and bytes)."""
    h = hashlib.sha256()
    for top in SOURCES:
        where = root / top
        for p in sorted(where.rglob("*.py") if where.is_dir() else [where]):
            if "__pycache__" in p.parts:
                continue
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def key(kind: str, call: Any, sources: bool = True) -> str:
    """The digest of one computation: ``kind`` and its JSON-able arguments ``call`` beside the
    sources (``sources`` False: without them, for an entry kept with its loaded files), the
    tools' versions, the host CPU and the session's numba settings."""
    import llvmlite
    import llvmlite.binding as ll
    import numba
    import numpy

    what = {"kind": kind, "call": call, "sources": sources_digest() if sources else None,
            "versions": [numba.__version__, llvmlite.__version__, numpy.__version__,
                         sys.version],
            "host": [ll.get_host_cpu_name(), ll.get_host_cpu_features().flatten()],
            "numba_env": sorted((k, v) for k, v in os.environ.items()
                                if k.startswith("NUMBA_"))}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


def kept(kind: str, call: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``'s JSON value, read back where a session computed it under the same key
    (``key``; or the same key without the sources and the same loaded files: ``loaded_hit``)
    and its stored digest matches it, else computed and written (whole, by rename: two
    sessions at once both keep a whole file). A store that cannot be read or written costs the
    time, never the value: it is computed."""
    where = folder()
    if where is None:
        return json.loads(json.dumps(compute()))  # as a kept value reads: lists, not tuples
    base = key(kind, call, sources=False)[:32]
    path = where / f"{kind}-{key(kind, call)[:32]}.json"
    found = loaded_hit(where, f"{kind}-{base}-") or read_verified(path)
    if found is not None:
        return found[0]
    before = _tree_sources()
    value, loaded = _computed(compute)
    entry: dict[str, Any] = {"value": value, "sha256": digest(value)}
    if loaded is not None:
        sources = loaded_sources(loaded)
        if any(before.get(k) != v for k, v in sources.items()):
            return value  # a loaded file moved while it computed: which bytes were compiled?
        entry = {"value": value, "sources": sources, "sha256": digest([value, sources])}
        path = where / f"{kind}-{base}-{digest(sources)[:16]}.json"
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, path)
    except OSError:  # a full disk, a store made read-only since: the value stands
        with contextlib.suppress(OSError):
            tmp.unlink()
        return value
    prune(where)
    return value


def _computed(compute: Callable[[], Any]) -> tuple[Any, list[str] | None]:
    """``compute()``'s JSON value and the files its children loaded (None: none said)."""
    before = getattr(_computing, "loaded", None)
    with tempfile.TemporaryDirectory(prefix="rb-loaded-") as rec:
        _computing.loaded = rec
        try:
            value = json.loads(json.dumps(compute()))
        finally:
            _computing.loaded = before
        lists = [json.loads(p.read_text()) for p in sorted(Path(rec).glob("*.json"))]
    if not lists:
        return value, None
    return value, sorted({r for files in lists for f in files
                          if (r := _in_tree(Path(f), ROOT)) is not None})


def _tree_sources() -> dict[str, Any]:
    """``loaded_sources`` of every ``.py`` of the checkout, before a computation: what its
    loaded files must still be after it for the entry to name the bytes it compiled."""
    files = []
    for here, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in _NOT_SOURCES and not d.startswith(".")
                   and d != "__pycache__"]
        files += [Path(here, n).relative_to(ROOT).as_posix() for n in names if n.endswith(".py")]
    return loaded_sources(files)


def recording_env() -> dict[str, str]:
    """What a child process of a computation adds to its environment to say which files it
    loaded (empty outside ``kept``). Read in the thread that called ``kept``."""
    rec = getattr(_computing, "loaded", None)
    return {LOADED_ENV: rec} if rec else {}


def record_loaded() -> None:
    """In a child started with ``recording_env``: at exit, write the checkout's files this
    process loaded (its modules and its script) for the computation that started it."""
    if os.environ.get(LOADED_ENV):
        atexit.register(_write_loaded, Path(os.environ[LOADED_ENV]))


def _write_loaded(rec: Path) -> None:
    files = {getattr(m, "__file__", None) for m in list(sys.modules.values())} | {sys.argv[0]}
    try:  # every file: the caller keeps those of its checkout
        (rec / f"{os.getpid()}.json").write_text(json.dumps(
            sorted(os.path.abspath(f) for f in files if isinstance(f, str) and os.path.isfile(f))))
    except OSError as e:  # a short list would keep stale facts: fail the compute instead
        print(f"codegen_store: cannot record the loaded files: {e}", file=sys.stderr)
        os._exit(3)


def _in_tree(path: Path, root: Path) -> str | None:
    """``path`` relative to the checkout, or None outside it (or in its .venv, build...)."""
    try:
        rel = path.resolve().relative_to(root)
    except (OSError, ValueError):
        return None
    return None if rel.parts and rel.parts[0] in _NOT_SOURCES else rel.as_posix()


def loaded_sources(files: list[str], root: Path | None = None) -> dict[str, Any]:
    """What a computation's loaded files (relative to ``root``, default the checkout) are kept
    with: each file's sha256 (None: gone), and each of their folders' ``.py`` names (a module
    added beside one is seen)."""
    root = ROOT if root is None else root
    out: dict[str, Any] = {}
    for rel in files:
        p = root / rel
        try:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError:
            out[rel] = None
        folder_ = p.parent
        if f"{folder_.relative_to(root).as_posix()}/" not in out:
            try:
                names = sorted(q.name for q in folder_.glob("*.py"))
            except OSError:
                names = []
            out[f"{folder_.relative_to(root).as_posix()}/"] = names
    return out


def loaded_hit(where: Path, prefix: str, root: Path | None = None) -> tuple[Any] | None:
    """(value,) of an entry named ``prefix``* whose digest matches and whose loaded files and
    folders are as they were when it was computed (the newest first); None if none is."""
    try:
        entries = sorted(where.glob(f"{prefix}*.json"), key=lambda p: -p.stat().st_mtime)
    except OSError:
        return None
    now: dict[str, Any] = {}
    for path in entries:
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not (isinstance(entry, dict) and set(entry) == {"value", "sources", "sha256"}
                and isinstance(entry["sources"], dict) and entry["sources"]
                and entry["sha256"] == digest([entry["value"], entry["sources"]])):
            continue
        files = [k for k in entry["sources"] if not k.endswith("/")]
        for rel in files:
            if rel not in now:
                now.update(loaded_sources([rel], root))
        if all(now.get(k) == v for k, v in entry["sources"].items()):
            with contextlib.suppress(OSError):
                os.utime(path)  # used: kept by ``prune``
            return (entry["value"],)
    return None


def read_verified(path: Path) -> tuple[Any] | None:
    """(value,) of a kept entry whose stored digest matches its value; None when it cannot be
    read, is not an entry, or was edited (the digest no longer matches)."""
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(entry, dict) and set(entry) == {"value", "sha256"}
            and entry["sha256"] == digest(entry["value"])):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used: kept by ``prune``
    return (entry["value"],)


def prune(where: Path, days: float = 14) -> None:
    """Remove what was not used for ``days`` (each edit of the sources keys new entries)."""
    old = time.time() - days * 86400
    try:
        entries = list(where.iterdir())
    except OSError:
        return
    for p in entries:
        with contextlib.suppress(OSError):
            if p.stat().st_mtime < old:
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink()


# numba's own cache (``cache=True``) is kept beside each source, in its ``__pycache__``: a
# fresh clone compiled every CPU kernel again (docs/tests.md: the cold and warm figures).
# numba checks a cached function against its own file's bytes and its own version and the
# CPU it targets; what it does not check, the code it inlines from other files, is the key.
NUMBA_TOPS = ("kernels", "roofs", "roofbench", "bench")
_NOT_SOURCES = {".git", ".venv", "build", "results", "node_modules", "wheelhouse"}


def numba_key(root: Path = ROOT) -> str:
    """The digest of what numba's cached code can depend on beyond its own file: the product
    sources (``NUMBA_TOPS``), the tools' versions and the session's ``NUMBA_`` settings."""
    import llvmlite
    import numba
    import numpy

    h = hashlib.sha256()
    for top in NUMBA_TOPS:
        for p in sorted((root / top).rglob("*.py")):
            if "__pycache__" not in p.parts:
                h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(json.dumps([numba.__version__, llvmlite.__version__, numpy.__version__,
                         sys.version, sorted((k, v) for k, v in os.environ.items()
                                             if k.startswith("NUMBA_"))]).encode())
    return h.hexdigest()


def _numba_units(root: Path) -> dict[str, list[Path]]:
    """numba's cached functions in the tree, by ``<folder>/<index name>``: each the index
    (``.nbi``) and its data files (``.N.nbc``), which only make sense together."""
    units: dict[str, list[Path]] = {}
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_SOURCES and not d.startswith(".")]
        if os.path.basename(here) != "__pycache__":
            continue
        rel = Path(here).parent.relative_to(root).as_posix()
        for f in files:
            if f.endswith(".nbi"):
                stem = f[:-len(".nbi")]
                units[f"{rel}/{f}"] = [Path(here) / f] + sorted(
                    Path(here) / g for g in files
                    if g.startswith(stem + ".") and g.endswith(".nbc"))
    return units


def numba_restore(root: Path = ROOT) -> int:
    """Put a kept numba cache of these sources (``numba_keep``) into the tree's
    ``__pycache__`` folders, each function whose index the tree lacks; returns how many."""
    where = folder("numba")
    if where is None:
        return 0
    entry = where / numba_key(root)[:32]
    have = _numba_units(root)
    n = 0
    for index in entry.rglob("*.nbi") if entry.is_dir() else []:
        rel = index.parent.relative_to(entry).as_posix().replace("%", "/")
        if f"{rel}/{index.name}" in have:
            continue
        dest = root / rel / "__pycache__"
        stem = index.name[:-len(".nbi")]
        with contextlib.suppress(OSError):
            dest.mkdir(parents=True, exist_ok=True)
            for data in index.parent.glob(f"{stem}.*.nbc"):
                shutil.copy2(data, dest / data.name)
            shutil.copy2(index, dest / index.name)  # last: an index without data is a miss
            n += 1
    with contextlib.suppress(OSError):
        os.utime(entry)  # used: kept by ``prune``
    return n


def numba_keep(root: Path = ROOT) -> int:
    """Keep the tree's numba cache for the next session of the same sources (a fresh clone):
    the whole set written beside, then swapped in by rename, so a reader sees one session's
    set or none. An entry that already holds as many functions is left. Returns how many."""
    where = folder("numba")
    if where is None:
        return 0
    units = _numba_units(root)
    entry = where / numba_key(root)[:32]
    if not units or (entry.is_dir() and sum(1 for _ in entry.rglob("*.nbi")) >= len(units)):
        return 0
    tmp = where / f".{entry.name}.{os.getpid()}"
    try:
        for name, files in units.items():
            sub = tmp / name.rsplit("/", 1)[0].replace("/", "%")
            sub.mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copy2(f, sub / f.name)
        old = where / f".{entry.name}.{os.getpid()}.old"
        with contextlib.suppress(OSError):
            entry.rename(old)
        tmp.rename(entry)
        shutil.rmtree(old, ignore_errors=True)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    prune(where)
    return len(units)
