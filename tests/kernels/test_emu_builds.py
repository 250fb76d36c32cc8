"""What an emulated build is keyed by and when it is built (tests/standins/cuda_tools.py,
emu_run.py): a header the source does not include leaves its build alone, one it includes
(directly or through another header) rebuilds it; a module's libraries are built on first
launch only. These make a header mutant of scripts/mutate_cuda.py rebuild only what its
tests launch."""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace

import cuda_tools as ct
import emu_run
import pytest


def test_a_build_key_follows_the_included_headers_only(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text('#include "outer.cuh"\n__global__ void k() {}\n')
    (tmp_path / "outer.cuh").write_text('#pragma once\n#include "inner.cuh"\n')
    (tmp_path / "inner.cuh").write_text("#pragma once\nint f();\n")
    (tmp_path / "other.cuh").write_text("#pragma once\nint g();\n")
    key = ct.build_key(src, ("-O1",))
    (tmp_path / "other.cuh").write_text("#pragma once\nint g2();\n")
    assert ct.build_key(src, ("-O1",)) == key  # not included: the same build
    (tmp_path / "inner.cuh").write_text("#pragma once\nint f2();\n")
    assert ct.build_key(src, ("-O1",)) != key  # included through outer.cuh: rebuilt


def test_a_planted_build_is_kept_by_what_its_folders_hold_not_where(tmp_path):
    """emu_run.build_mutant's build: the edited copies in a folder of their own (a session's
    temporary one) searched first. The same copies in another folder take the kept build (a
    key naming the folder rebuilt every planted bug in every session); a header edited there,
    found through the include folder by a header beside the source, is another build."""
    def planted_key(where: str, header: str) -> str:
        out, inc = tmp_path / where / "src", tmp_path / where / "inc"
        out.mkdir(parents=True)
        inc.mkdir()
        (out / "k.cu").write_text('#include "outer.cuh"\nint k;\n')
        (out / "outer.cuh").write_text('#pragma once\n#include "inner.cuh"\n')
        (inc / "inner.cuh").write_text(header)
        return ct.emu_build_key(out / "k.cu", "-O1", includes=(out, inc))

    assert planted_key("session-a", "int f();\n") == planted_key("session-b", "int f();\n")
    assert planted_key("session-c", "int f2();\n") != planted_key("session-d", "int f();\n")


def test_the_tree_s_sources_include_what_they_say():
    names = {s: sorted(p.name for p in ct.included_headers(ct.CUDA_DIR / s))
             for s in ("vector_add.cu", "gemm.cu", "gemm_wgmma.cu")}
    assert names["vector_add.cu"] == ["common.cuh"]
    assert names["gemm.cu"] == ["common.cuh", "mma.cuh"]
    assert {"common.cuh", "hopper_ops.cuh", "wgmma_layout.cuh"} <= set(names["gemm_wgmma.cu"])
    assert "mma.cuh" not in names["gemm_wgmma.cu"]


def test_emulated_libraries_are_built_on_first_launch(monkeypatch):
    built = []

    def fake_build(src: str) -> Path:
        built.append(src)
        return Path(src)

    monkeypatch.setattr(ct, "build_emulated", fake_build)
    monkeypatch.setattr(ctypes, "CDLL", lambda path: SimpleNamespace(
        rb_launch=SimpleNamespace(restype=None)))
    libs = emu_run.emulation_libs(("vector_add.cu", "gemm.cu"))
    assert built == []
    assert libs["vector_add.cu"] is libs["vector_add.cu"]
    assert built == ["vector_add.cu"]  # once, and gemm.cu not at all
    with pytest.raises(KeyError, match="stream.cu"):
        libs["stream.cu"]


def test_a_driver_source_is_built_alone(monkeypatch, tmp_path):
    built = []
    monkeypatch.setattr(ct, "build_driver_source",
                        lambda ds, out: built.append(ds.stem) or out / f"driver_{ds.stem}.so")
    so = ct.build_driver_emulated.__wrapped__("hopper_unit")  # past the session's cache
    assert built == ["hopper_unit"] and so.name == "driver_hopper_unit.so"


def test_a_host_build_is_kept_by_its_bytes(monkeypatch, tmp_path):
    """gxx_kept (the CuTe oracle's object): built once; the same source and headers in another
    folder take the kept file, its bytes and mode; an edited header builds again."""
    monkeypatch.setenv("RB_TEST_STORE", str(tmp_path / "store"))
    builds = []

    def build_in(where: str, header: str) -> bytes:
        d = tmp_path / where
        (d / "inc").mkdir(parents=True)
        (d / "o.cpp").write_text('#include "h.h"\n')
        (d / "inc" / "h.h").write_text(header)
        out = d / "o.o"

        def build() -> None:
            builds.append(where)
            out.write_bytes(header.encode())
            out.chmod(0o755)

        ct.gxx_kept(d / "o.cpp", ("-O1",), (d / "inc",), out, build)
        assert out.stat().st_mode & 0o111
        return out.read_bytes()

    assert build_in("a", "int f();") == build_in("b", "int f();") == b"int f();"
    assert builds == ["a"]
    assert build_in("c", "int g();") == b"int g();"
    assert builds == ["a", "c"]


def test_a_host_build_the_store_cannot_keep_still_stands(monkeypatch, tmp_path):
    """A store write that fails (a full disk) costs the keeping, never the build."""
    import shutil

    monkeypatch.setenv("RB_TEST_STORE", str(tmp_path / "store"))
    (tmp_path / "o.cpp").write_text("int f();\n")
    out = tmp_path / "o.o"
    real = shutil.copy2

    def full(src, dst, **kw):
        if str(dst).startswith(str(tmp_path / "store")):
            raise OSError(28, "No space left on device")
        return real(src, dst, **kw)

    monkeypatch.setattr(shutil, "copy2", full)
    ct.gxx_kept(tmp_path / "o.cpp", ("-O1",), (), out, lambda: out.write_bytes(b"obj"))
    assert out.read_bytes() == b"obj"
    assert list((tmp_path / "store" / "emu").iterdir()) == []
