"""The architecture's promises: one import name, one level per folder, imports one way.

Floors, lowest first: the shared root (roofbench/*.py) <- kernels/ <- roofs/ <- bench/; inside
bench/: backends/ <- counters/ and measure/ (the core) <- suite/, profile/, gate/ <- pytest/,
and fleet/ beside them <- cli/; present/ imports only the shared root.
A source file past 450 lines is a warning (cut it if it holds two things, never to meet
the count); past 800 it fails. ``python tests/test_layout.py`` prints
the import map's floors.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 450  # a warning: look whether the file holds two things
HARD_MAX_LINES = 800  # no utility file that grows without end

# Each floor, and the floors it may import from (besides itself and the standard library).
FLOORS: dict[str, set[str]] = {
    "root": set(),
    "kernels": {"root"},
    "roofs": {"root", "kernels"},
    "bench": {"root", "kernels", "roofs"},  # bench/results.py, bench/errors.py
    "bench.present": {"root"},
    "bench.backends": {"root", "kernels", "roofs", "bench"},
    "bench.counters": {"root", "kernels", "roofs", "bench", "bench.backends"},
    "bench.measure": {"root", "kernels", "roofs", "bench", "bench.backends", "bench.present"},
    "bench.suite": {"root", "kernels", "roofs", "bench", "bench.backends", "bench.present",
                    "bench.measure", "bench.counters"},
    "bench.profile": {"root", "kernels", "roofs", "bench", "bench.backends", "bench.present",
                      "bench.measure"},
    "bench.gate": {"root", "kernels", "roofs", "bench", "bench.backends", "bench.present",
                   "bench.measure"},
    "bench.pytest": {"root", "kernels", "roofs", "bench", "bench.backends", "bench.present",
                     "bench.measure", "bench.gate"},
    "bench.fleet": {"root", "kernels", "roofs", "bench", "bench.backends", "bench.present"},
    "bench.trace": {"root", "kernels", "roofs", "bench", "bench.backends", "bench.present",
                    "bench.measure", "bench.profile"},
    "bench.tune": {"root", "kernels", "roofs", "bench", "bench.backends", "bench.present",
                   "bench.measure"},
    "bench.cli": {"root", "kernels", "roofs", "bench", "bench.backends", "bench.present",
                  "bench.counters", "bench.measure", "bench.suite", "bench.profile", "bench.gate",
                  "bench.fleet", "bench.trace", "bench.tune"},
}
FOLDERS = {"roofbench": "roofbench", "kernels": "roofbench.kernels", "roofs": "roofbench.roofs",
           "bench": "roofbench.bench"}


def floor_of_module(mod: str) -> str | None:
    """The floor a roofbench module is on, None for anything else."""
    parts = mod.split(".")
    if parts[0] != "roofbench":
        return None
    if len(parts) == 1 or parts[1] not in ("kernels", "roofs", "bench"):
        return "root"
    if parts[1] == "bench" and len(parts) > 2 and f"bench.{parts[2]}" in FLOORS:
        return f"bench.{parts[2]}"
    return parts[1]


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("").parts
    dotted = [FOLDERS.get(rel[0], rel[0]), *rel[1:]]  # tests/, scripts/ as they are
    if dotted[-1] == "__init__":
        dotted = dotted[:-1]
    return ".".join(dotted)


# The one upward import, named: the package's face hands out the user API (roofbench.measure,
# roofbench.Session) from its module __getattr__ on first use, never at import time.
FACADE = ROOT / "roofbench" / "__init__.py"
FACADE_IMPORTS = {"roofbench.bench.measure", "roofbench.bench.measure.api",
                  "roofbench.bench.profile", "roofbench.bench.profile.torch_program",
                  "roofbench.bench.trace", "roofbench.bench.trace.api",
                  "roofbench.bench.tune", "roofbench.bench.tune.search"}


def facade_getattr(tree: ast.Module) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef)
                 and n.name == "__getattr__"), None)


def imports_of(path: Path, tree: ast.AST | None = None) -> set[str]:
    if tree is None:
        tree = ast.parse(path.read_text())
        if path == FACADE and (lazy := facade_getattr(tree)) is not None:
            assert isinstance(tree, ast.Module)
            tree.body.remove(lazy)  # checked on its own: test_the_facade_imports_lazily
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mod = from_module(path, node)
            names.add(mod)
            names |= {f"{mod}.{a.name}" for a in node.names}  # "from pkg import module"
    return names


def from_module(path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` in ``path`` names; a relative one resolved against
    the module's package."""
    mod = node.module or ""
    if not node.level:
        return mod
    pkg = module_of(path).split(".")
    if path.name != "__init__.py":
        pkg = pkg[:-1]
    base = pkg[: len(pkg) - (node.level - 1)]
    return ".".join(base + ([mod] if mod else []))


def sources() -> list[Path]:
    out = list((ROOT / "roofbench").glob("*.py"))
    for folder in ("kernels", "roofs", "bench"):
        out += sorted((ROOT / folder).rglob("*.py"))
    return sorted(out)


def floor_map() -> dict[str, dict[str, set[str]]]:
    """floor -> floor it imports -> the modules of the first that do."""
    out: dict[str, dict[str, set[str]]] = {}
    for p in sources():
        me = floor_of_module(module_of(p))
        assert me is not None
        for imp in imports_of(p):
            other = floor_of_module(imp)
            if other is not None and other != me:
                out.setdefault(me, {}).setdefault(other, set()).add(module_of(p))
    return out


def test_imports_point_one_way():
    bad = {f"{src} -> {dst}": sorted(mods) for src, dsts in floor_map().items()
           for dst, mods in dsts.items() if dst not in FLOORS[src]}
    assert bad == {}


def test_the_shared_root_and_present_import_nothing_above_them():
    fm = floor_map()
    assert set(fm.get("root", {})) == set()
    assert set(fm.get("bench.present", {})) <= {"root"}


def test_the_facade_imports_the_api_lazily():
    """roofbench/__init__.py imports nothing above the root at import time; its __getattr__
    imports the API module and nothing else, and importing a root module loads no floor."""
    lazy = facade_getattr(ast.parse(FACADE.read_text()))
    assert lazy is not None
    assert imports_of(FACADE, lazy) == FACADE_IMPORTS
    code = ("import sys, roofbench.records, roofbench.gate; "
            "print(sorted(m for m in sys.modules if m.startswith('roofbench.bench')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    from roofbench.bench.measure import api

    import roofbench

    assert roofbench.measure is api.measure and roofbench.Session is api.Session


# Import circles among the project's modules, counting every import: at a module's top, in a
# function's body (a deferred import hides a circle, it does not break it) and under
# TYPE_CHECKING. A circle is broken by moving the shared piece to a module below both; the last
# ones (issue 31 item 4) are broken, so any circle fails: the list only shrinks, and is empty.
KNOWN_CIRCLES: set[frozenset[str]] = set()


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (every import, deferred ones too)."""
    mods = {module_of(p): p for p in sources()}
    return {m: {i for i in imports_of(p) if i in mods and i != m} for m, p in mods.items()}


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: set[frozenset[str]] = set()
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.add(w)
                    if w == v:
                        break
                if len(group) > 1:
                    out.add(frozenset(group))
    return out


def test_the_circle_finder_finds_circles_and_deferred_imports():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "a"}}
    assert circles(graph) == {frozenset("abc")}
    deferred = ast.parse("def f():\n    from .roofline import pick\n")
    assert "roofbench.roofline" in imports_of(ROOT / "roofbench" / "records.py", deferred)


def test_no_import_circles_but_the_known_ones():
    """The circles once hidden behind deferred imports (present/sections <-> its section
    modules, kernels/arrays <-> spec, roofbench/records <-> roofline) stay broken."""
    found = circles(import_graph())
    assert sorted(sorted(c) for c in found - KNOWN_CIRCLES) == []
    assert sorted(sorted(c) for c in KNOWN_CIRCLES - found) == []  # broken: strike it out


# A private name (one leading underscore) taken from another project module is a contract its
# module never declared: made public, or the piece moved, instead. The last ones (issue 31 item
# 4) are gone: any one fails (the list only shrinks, and is empty).
PRIVATE_IMPORTS_ALLOWED: set[tuple[str, str]] = set()


def private_imports(path: Path, tree: ast.AST | None = None) -> set[str]:
    """The private names ``path`` takes from other project modules, as ``module.name``: by
    ``from module import _name`` (deferred ones too), or as ``alias._name`` of a module it
    imported."""
    tree = tree if tree is not None else ast.parse(path.read_text())
    mods = project_modules()
    me = module_of(path)
    found: set[str] = set()
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = from_module(path, node)
            for a in node.names:
                if f"{mod}.{a.name}" in mods:
                    aliases[a.asname or a.name] = f"{mod}.{a.name}"
                elif mod in mods and mod != me and _private(a.name):
                    found.add(f"{mod}.{a.name}")
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name for a in node.names if a.asname and a.name in mods}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases and _private(node.attr):
            found.add(f"{aliases[node.value.id]}.{node.attr}")
    return found


@functools.cache
def project_modules() -> frozenset[str]:
    return frozenset(module_of(p) for p in sources())


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_a_private_name_is_found_however_it_is_taken():
    here = ROOT / "bench" / "suite" / "scan.py"
    code = ("from .runner import _record, time_case\n"
            "def f():\n    from . import runner as r\n    return r._fill_metrics\n")
    assert private_imports(here, ast.parse(code)) == {
        "roofbench.bench.suite.runner._record", "roofbench.bench.suite.runner._fill_metrics"}


def test_no_private_name_is_taken_from_another_module():
    found = {(str(p.relative_to(ROOT)), name) for p in sources() for name in private_imports(p)}
    assert sorted(found - PRIVATE_IMPORTS_ALLOWED) == []
    assert sorted(PRIVATE_IMPORTS_ALLOWED - found) == []  # made public: strike it out


def bound_names(tree: ast.AST) -> set[str]:
    """The names a module binds itself (def, class, assignment), not those it imports."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.withitem)):
            targets = node.targets if isinstance(node, ast.Assign) else [
                node.optional_vars if isinstance(node, ast.withitem) else node.target]
            out |= {n.id for t in targets if t is not None for n in ast.walk(t)
                    if isinstance(n, ast.Name)}
    return out


@functools.cache
def module_files() -> dict[str, Path]:
    return {module_of(p): p for p in sources()}


@functools.cache
def names_bound_in(mod: str) -> frozenset[str]:
    tree = ast.parse(module_files()[mod].read_text())
    if mod == "roofbench" and (lazy := facade_getattr(tree)) is not None:  # the lazy API
        return frozenset(bound_names(tree) | {c.value for c in ast.walk(lazy)
                                              if isinstance(c, ast.Constant)
                                              and isinstance(c.value, str)})
    return frozenset(bound_names(tree))


def reexported_imports(path: Path, tree: ast.AST | None = None) -> set[str]:
    """``module.name`` for each name ``path`` imports from a project module that only imports
    it itself: one import path per name, its home."""
    tree = tree if tree is not None else ast.parse(path.read_text())
    mods = project_modules()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = from_module(path, node)
            found |= {f"{mod}.{a.name}" for a in node.names
                      if mod in mods and f"{mod}.{a.name}" not in mods
                      and a.name not in names_bound_in(mod)}
    return found


def test_a_reexported_name_is_found():
    here = ROOT / "bench" / "suite" / "scan.py"
    code = ("from roofbench.records import CaseResult, RoofSet\n"
            "from roofbench.roof_records import Roof\n"
            "def f():\n    from ..measure.callables import MeasureError\n")
    assert reexported_imports(here, ast.parse(code)) == {
        "roofbench.records.RoofSet", "roofbench.bench.measure.callables.MeasureError"}


def test_every_name_is_imported_from_its_home():
    files = sources() + sorted((ROOT / "tests").rglob("*.py")) + sorted(
        (ROOT / "scripts").rglob("*.py"))
    found = {(str(p.relative_to(ROOT)), name) for p in files
             for name in reexported_imports(p) if ROOT / "tests" / "fixtures" not in p.parents}
    assert sorted(found) == []


def test_a_long_source_file_warns_and_a_very_long_one_fails():
    files = sources() + sorted((ROOT / "scripts").rglob("*.py"))
    lines = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in files}
    for name, n in sorted(lines.items()):
        if n > MAX_LINES:
            warnings.warn(f"{name} has {n} lines (over {MAX_LINES}): does it hold two things?",
                          stacklevel=1)
    assert {name: n for name, n in lines.items() if n > HARD_MAX_LINES} == {}


def test_every_code_folder_is_a_listed_package():
    """A sub-package missing from pyproject's list would vanish from an installed copy (a
    folder of CUDA sources is a data-only package: its files ship as its package data)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {"roofbench"} | {
        ".".join(["roofbench", *p.parent.relative_to(ROOT).parts])
        for folder in ("kernels", "bench", "roofs")
        for p in [*(ROOT / folder).rglob("__init__.py"), *(ROOT / folder).rglob("*.cu")]}
    assert found == listed


def test_code_folders_install_under_one_name():
    import roofbench.bench
    import roofbench.kernels
    import roofbench.roofs

    assert Path(roofbench.kernels.__file__).parent == ROOT / "kernels"
    assert Path(roofbench.bench.__file__).parent == ROOT / "bench"
    assert Path(roofbench.roofs.__file__).parent == ROOT / "roofs"
    # The install adds no generic top-level `bench`/`kernels`/`roofs` (checked from another
    # folder: the working directory itself is on sys.path under `python -m pytest`).
    code = ("import importlib.util as u, sys; "
            "print([n for n in ('bench', 'kernels', 'roofs') "
            f"if (s := u.find_spec(n)) and s.origin and s.origin.startswith({str(ROOT)!r})])")
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_tests_mirror_the_package():
    """A test file sits in the folder of what it tests (tests/<folder>/...), the stand-ins in
    tests/standins/."""
    top = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    assert top == ["test_layout.py"]
    for folder in ("roofbench", "kernels", "roofs", "bench/backends", "bench/counters",
                   "bench/measure", "bench/suite", "bench/profile", "bench/gate", "bench/pytest",
                   "bench/present", "bench/cli", "bench/fleet", "bench/trace"):
        assert list((ROOT / "tests" / folder).glob("test_*.py")), folder


def test_offline_setup_installs_nothing_and_names_the_interpreter():
    """ROOFBENCH_NO_INSTALL=1: make bench on an offline GPU box uses the interpreter as is."""
    env = {**os.environ, "ROOFBENCH_NO_INSTALL": "1", "PYTHON": sys.executable,
           "VENV": "/nonexistent-venv"}
    out = subprocess.run(["bash", str(ROOT / "scripts" / "setup_env.sh")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == shutil.which(sys.executable) or \
        Path(out.stdout.strip()).resolve() == Path(sys.executable).resolve()
    assert "no install" in out.stderr
    assert not Path("/nonexistent-venv").exists()


FAKE_PYTHON = """#!/bin/sh
# Stands for python3 and the venv's python: logs each call, installs nothing.
echo "$*" >> "$(dirname "$0")/calls.log"
case "$*" in
  "-m venv "*) mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
  *sysconfig*) echo /site-packages ;;
esac
exit 0
"""


def test_make_test_installs_without_bytecode_and_make_bench_compiles_it(tmp_path):
    """pip's compile of every module (most of the install) is skipped for make test's
    environment; make bench's processes import the same modules again and again, so its
    environment has them compiled."""
    fake = tmp_path / "py" / "python3"
    fake.parent.mkdir()
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    venv = tmp_path / "venv"
    env = {**os.environ, "PYTHON": str(fake), "VENV": str(venv)}
    env.pop("ROOFBENCH_NO_INSTALL", None)

    def setup(*args: str) -> list[str]:
        log = venv / "bin" / "calls.log"
        log.unlink(missing_ok=True)
        out = subprocess.run(["bash", str(ROOT / "scripts" / "setup_env.sh"), *args],
                             env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"{venv}/bin/python"
        return log.read_text().splitlines() if log.exists() else []

    dev = [c for c in setup("dev") if c.startswith("-m pip install")]
    assert len(dev) == 2 and all("--no-compile" in c for c in dev), dev
    assert (venv / ".roofbench-uncompiled").exists()
    assert setup("dev") == []  # installed: nothing again
    bench = setup()
    assert [c for c in bench if c.startswith("-m pip install")] and not any(
        "--no-compile" in c for c in bench), bench
    assert "-m compileall -q -j 0 /site-packages" in bench
    assert not (venv / ".roofbench-uncompiled").exists()
    assert not any("compileall" in c for c in setup())  # compiled once


# -- the docs, true to the code ---------------------------------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def floor_lines() -> list[str]:
    return [f"{src:15s} imports {', '.join(sorted(dsts)) or '-'}"
            for src, dsts in sorted(floor_map().items())]


def feature_table() -> dict[str, list[Path]]:
    """docs/architecture.md's feature table: feature -> the paths its cells name."""
    text = ARCHITECTURE.read_text()
    rows = text[text.index("| feature | shared root"):].split("\n\n")[0].splitlines()[2:]
    bases = (ROOT / "roofbench", ROOT, ROOT, ROOT / "bench" / "cli")
    out: dict[str, list[Path]] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        paths = out.setdefault(cells[0], [])
        for base, cell in zip(bases, cells[1:], strict=True):
            for name in re.findall(r"`([^`]+)`", cell):
                paths.append(ROOT / name if name.startswith("scripts/") else base / name)
    return out


def test_the_feature_table_names_every_module():
    named = [p for paths in feature_table().values() for p in paths]
    assert [str(p.relative_to(ROOT)) for p in named if not p.exists()] == []
    folders = [p for p in named if p.is_dir()]
    code = list((ROOT / "roofbench").glob("*.py")) + sorted((ROOT / "bench").rglob("*.py"))
    unnamed = [str(p.relative_to(ROOT)) for p in code
               if p not in named and not any(f in p.parents for f in folders)
               and not (p.name == "__init__.py" and not p.read_text().strip())]
    assert unnamed == []


def test_the_feature_table_check_fails_on_a_missing_file(monkeypatch, tmp_path):
    doc = tmp_path / "architecture.md"
    doc.write_text("| feature | shared root | k | b | c |\n|---|---|---|---|---|\n"
                   "| x | `gone.py` | | `bench/nowhere/` | |\n\nrest\n")
    monkeypatch.setattr(sys.modules[__name__], "ARCHITECTURE", doc)
    assert feature_table() == {"x": [ROOT / "roofbench" / "gone.py", ROOT / "bench/nowhere/"]}
    with pytest.raises(AssertionError):
        test_the_feature_table_names_every_module()


def test_the_documented_map_is_the_map():
    text = ARCHITECTURE.read_text()
    block = text[text.index("prints the map as it is"):].split("```")[1].strip().splitlines()
    assert block == floor_lines()


def test_the_docs_state_the_schema_version_the_code_writes():
    from roofbench.records import RESULTS_SCHEMA_VERSION

    readme = (ROOT / "README.md").read_text()
    assert re.findall(r"schema version (\d+)", readme) == [str(RESULTS_SCHEMA_VERSION)]
    assert re.findall(r"results\.json \(`roofbench\.results`, version (\d+)\)",
                      ARCHITECTURE.read_text()) == [str(RESULTS_SCHEMA_VERSION)]


if __name__ == "__main__":  # the import map's floors, for a reader
    print("\n".join(floor_lines()))


def test_files_with_a_slow_test_are_handed_out_first(request):
    """make test's order (tests/conftest.py, with xdist's reordering off): a worker that drew
    a two-minute file last ran it alone while the other idled. The order is this session's."""
    files: list[str] = []
    slow: set[str] = set()
    for item in request.session.items:
        f = item.nodeid.split("::")[0]
        if not files or files[-1] != f:
            assert f not in files, f"{f} is split in the order"
            files.append(f)
        if item.get_closest_marker("slow"):
            slow.add(f)
    flags = [f in slow for f in files]
    assert flags == sorted(flags, reverse=True), "a file with a slow test after one without"


# ----------------------------------------------------------------------------- links
# Every relative link of the Markdown a clone carries resolves: README.md, docs/*.md and the
# notes kept in results/ (a run folder's NOTE.md, README.md, profile.md). results/ keeps only
# the runs these pages cite (a report is rebuilt by `roofbench report RUN`), so a run removed
# while a page still cites it, or a report.md linked though no longer committed, fails here.

# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
RESULTS_LIMIT_MB = 30


def link_pages() -> list[Path]:
    out = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return out + sorted((ROOT / "results").rglob("*.md"))


def local_targets(page: Path) -> list[str]:
    """The page's link targets inside the tree (no URL, no in-page anchor), without anchor."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code links nothing
    text = re.sub(r"`[^`\n]*`(?!\])", "", text)  # inline code too (a link's `text` stays)
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        out.append(urllib.parse.unquote(target.split("#", 1)[0]))
    return out


def broken(page: Path) -> list[str]:
    return [t for t in local_targets(page) if not (page.parent / t).exists()]


def test_the_link_pattern_reads_links_and_images(tmp_path):
    page = tmp_path / "p.md"
    (tmp_path / "there.png").write_bytes(b"")
    page.write_text("![fig](there.png) [a](gone/report.md#top) [b](https://x.org/y) [c](#s)\n"
                    "```\n[d](in-code.md)\n```\n`f[g](...)` [`e`](there.png)\n")
    assert local_targets(page) == ["there.png", "gone/report.md", "there.png"]
    assert broken(page) == ["gone/report.md"]


@pytest.mark.parametrize("page", link_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken(page) == []


def tracked_files(under: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", under], cwd=ROOT, capture_output=True,
                         check=True).stdout.decode()
    return [ROOT / p for p in out.split("\0") if p]


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_results_is_small_enough_to_clone_and_carries_no_report():
    files = tracked_files("results")
    assert files, "no stored run: the tests that read results/ would have nothing"
    mb = sum(p.stat().st_size for p in files if p.exists()) / 2**20
    assert mb <= RESULTS_LIMIT_MB, f"results/ holds {mb:.1f} MB"
    # a report is a pure function of results.json: `roofbench report RUN` rebuilds it
    assert [p for p in files if p.name in ("report.html", "report.md")] == []
