"""report.md: the header, then every section of sections.SECTIONS rendered as Markdown (a pure
function of results.json; report_html.py renders the same sections)."""

from __future__ import annotations

import pandas as pd

from roofbench.records import RunResult

from .blocks import Renderer, Section, Table, guarded
from .sections import SECTIONS


def render(run: RunResult) -> str:
    """report.md: the header, then every section in order."""
    out = header_lines(run)
    for title, fn in SECTIONS:
        section = guarded(title, fn, run)
        if section is not None:
            out += section_lines(section)
    return "\n".join(out)


def header_lines(run: RunResult) -> list[str]:
    """Device, backend, when, the command and the commit; then the run's notes as quotes."""
    out = [f"# roofbench report: {run.device}", "",
           f"- backend: `{run.backend}`", f"- created: {run.created}",
           f"- command: `{' '.join(run.command)}`", f"- git commit: `{run.git_commit}`", ""]
    out += [f"> {note}" for note in run.notes] + ([""] if run.notes else [])
    return out


def section_lines(section: Section) -> list[str]:
    out = [f"## {section.title}", ""]
    for b in section.blocks:
        out += block_lines(b) + [""]
    return out


block_lines = Renderer[list[str]](
    text=lambda b: [b.text],
    lines=lambda b: list(b.lines),
    items=lambda b: [f"- {x}" for x in b.items],
    sub=lambda b: [f"### {b.title}"],
    image=lambda b: [f"![{b.alt}]({b.path})"],
    table=lambda b: _table(b).splitlines() or [""],
)


def _table(t: Table) -> str:
    if t.plain:
        header = t.headers or (list(t.rows[0]) if t.rows else [])
        out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        out += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in t.rows]
        return "\n".join(out)
    return str(pd.DataFrame(t.rows).to_markdown(index=False))
