"""`roofbench trace` on what is not a usable trace: one line, exit 2 (README's table),
nothing written, nothing written over."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from roofbench.bench.cli import main  # noqa: E402

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(["trace", *argv])
    err = capsys.readouterr().err
    return code, err


def truncated(tmp_path: Path) -> Path:
    data = (FIX / "hta-mi250-rocm62.json.gz").read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    return p


CASES = {
    "a JSON list": (lambda t: _write(t / "a.json", "[1, 2, 3]"), "not a PyTorch profiler trace"),
    "text": (lambda t: _write(t / "a.json", "hello, world"), "not a complete JSON trace"),
    "a truncated .gz": (truncated, "truncated or damaged .gz"),
    "no ops": (lambda t: _write(t / "a.json", json.dumps({"traceEvents": []})),
               "no ops and no device work"),
    "a missing file": (lambda t: t / "nope.json", "no such trace file"),
    "an empty folder": (lambda t: t, "no .json, .json.gz or .xplane.pb trace"),
}


def _write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, tmp_path, capsys):
    make, says = CASES[case]
    src = tmp_path / "in"
    src.mkdir()
    path = make(src)
    code, err = run(capsys, str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_an_out_that_is_a_file_is_refused_before_the_trace_is_read(tmp_path, capsys):
    (tmp_path / "out").write_text("mine")
    code, err = run(capsys, str(FIX / "gpt2-tiny-cpu" / "trace.json.gz"), "--out",
                    str(tmp_path / "out"))
    assert code == 2 and "is a file" in err and (tmp_path / "out").read_text() == "mine"


def test_a_folder_holding_a_run_is_never_written_over(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}")
    code = main(["trace", str(FIX / "hta-mi250-rocm62.json.gz"), "--device", "MI300X",
                 "--out", str(out)])
    assert code == 0 and (out / "results.json").read_text() == "{}"
    assert (tmp_path / "out-2" / "results.json").is_file()


def test_a_gz_that_is_not_gzip_inside_is_read_as_json(tmp_path, capsys):
    p = tmp_path / "plain.json.gz"
    with gzip.open(FIX / "hta-a100-triton.json.gz") as f:
        p.write_bytes(f.read())  # named .gz, plain JSON inside: read by its bytes
    code, _ = run(capsys, str(p), "--device", "NVIDIA H100 80GB HBM3", "--out",
                  str(tmp_path / "o"))
    assert code == 0
