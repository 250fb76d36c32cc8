"""The streaming reader (bench/trace/reader.py): events decoded chunk by chunk, the same
whatever the chunk's size, and a trace cut short refused in one line."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from roofbench.bench.trace import reader
from roofbench.bench.trace.reader import TraceError, read_trace

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def summary(tr):
    return (tr.events, [(o.name, o.ts, o.dur, o.inputs) for o in tr.ops],
            [(w.name, w.ts, w.corr) for w in tr.work], tr.inputs, tr.flow_s, tr.head)


def test_events_cut_by_every_chunk_boundary_read_the_same(monkeypatch):
    whole = summary(read_trace(FIX / "hta-mi250-rocm62.json.gz"))
    monkeypatch.setattr(reader, "CHUNK", 97)  # cuts most events, keys and numbers
    assert summary(read_trace(FIX / "hta-mi250-rocm62.json.gz")) == whole
    assert whole[0] == 220 and len(whole[1]) == 70 and len(whole[2]) == 16


def test_a_plain_json_cut_inside_its_events_is_refused(tmp_path, monkeypatch):
    with gzip.open(FIX / "hta-a100-triton.json.gz") as f:
        text = f.read()
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: int(len(text) * 0.6)])
    monkeypatch.setattr(reader, "CHUNK", 101)
    with pytest.raises(TraceError, match="not a complete JSON trace"):
        read_trace(cut)


def test_device_properties_written_after_the_events_are_found(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", '
                 '"pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": {}}], '
                 '"deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}]}')
    tr = read_trace(p)
    assert tr.events == 1 and tr.devices == [{"name": "NVIDIA H100 80GB HBM3"}]
