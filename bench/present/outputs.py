"""Writing a run's report files, in one place: report.md, then report.html beside it (a page
that fails never costs the report), and the roofline's PNG and SVG; each atomically. A run
with ``--no-figures`` writes report.md alone (``write_report_md``): the figures and the page
are pure functions of results.json, drawn later by `roofbench plot` and `roofbench report`."""

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


def no_figures_note(folder: Path) -> str:
    """The line that says which files a run without figures left out, and how to draw them."""
    return (f"figures not drawn (--no-figures): `roofbench plot {folder}` draws "
            f"roofline.png/.svg (and an occupancy scan's occupancy.png/.svg), `roofbench report "
            f"{folder}` writes report.html")


def write_report_md(run: RunResult, folder: Path) -> list[Path]:
    """report.md alone (``--no-figures``: a CI gate or a smoke run wants the data, not the
    pictures; matplotlib and Bokeh are never imported), with the line that says how to draw
    what it left out under its header. `roofbench report` rewrites it without that line."""
    from .report import header_lines, render

    head = "\n".join(header_lines(run)) + "\n"  # render's first lines: device, run, notes
    text = render(run).removeprefix(head)
    path = folder / "report.md"
    atomic_write_text(path, f"{head}> {no_figures_note(folder)}\n\n{text}")
    return [path]
