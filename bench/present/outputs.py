"""Writing a run's report files, in one place: report.md, then report.html beside it (a page
that fails never costs the report), and the roofline's PNG and SVG; each atomically."""

from __future__ import annotations

from pathlib import Path

from roofbench.fileio import atomic_write_text
from roofbench.records import RunResult


def write_report(run: RunResult, path: Path) -> list[Path]:
    """report.md at ``path`` and report.html beside it; returns both paths."""
    from .report import render
    from .report_html import missing_note, render_html

    note = missing_note()
    atomic_write_text(path, render(run) + (f"\n> {note}\n" if note else ""))
    page = path.with_suffix(".html")
    atomic_write_text(page, render_html(run))
    return [path, page]


def write_outputs(run: RunResult, folder: Path) -> list[Path]:
    """Everything rebuilt from a run into its folder: roofline.png/.svg, occupancy.png/.svg
    (an occupancy scan's), report.md/.html (last, in that order)."""
    from .occupancy_scan import plot_occupancy
    from .plot import plot_run

    figures = plot_run(run, folder / "roofline") + plot_occupancy(run, folder / "occupancy")
    return figures + write_report(run, folder / "report.md")
