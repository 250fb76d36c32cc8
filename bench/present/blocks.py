"""The blocks of a report section, and a section: what sections.py and the section modules
(amdahl.py, ncu_section.py, occupancy_scan.py, profile/report.py) build, and what report.py and
report_html.py render. Its own module, below them all, so that sections.py imports the section
modules at its top (no circle)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from roofbench.errors_text import first_line
from roofbench.records import RunResult


@dataclass
class Text:
    text: str


@dataclass
class Lines:
    lines: list[str]


@dataclass
class Items:
    items: list[str]


@dataclass
class Table:
    rows: list[dict[str, Any]]
    plain: bool = False  # Markdown: a bare pipe table, cells as given (no column padding)
    headers: list[str] | None = None  # shown instead of the row keys (names may repeat)
    html_columns: dict[str, list[str]] = field(default_factory=dict)  # raw HTML, per row


@dataclass
class Sub:
    title: str


@dataclass
class Image:
    """A figure written beside the report (its file name in the run folder); report.html
    inlines ``svg()``, the same figure drawn as SVG markup, to stay one self-contained page."""

    path: str
    alt: str
    svg: Callable[[], str] | None = None


Block = Text | Lines | Items | Table | Sub | Image


T = TypeVar("T")


@dataclass(frozen=True)
class Renderer(Generic[T]):
    """One format's form of each kind of block (report.py's Markdown lines, report_html.py's
    HTML), called on a block: a new kind of block is a field every format must fill."""

    text: Callable[[Text], T]
    lines: Callable[[Lines], T]
    items: Callable[[Items], T]
    sub: Callable[[Sub], T]
    image: Callable[[Image], T]
    table: Callable[[Table], T]

    def __call__(self, b: Block) -> T:
        if isinstance(b, Text):
            return self.text(b)
        if isinstance(b, Lines):
            return self.lines(b)
        if isinstance(b, Items):
            return self.items(b)
        if isinstance(b, Sub):
            return self.sub(b)
        if isinstance(b, Image):
            return self.image(b)
        return self.table(b)


@dataclass
class Section:
    title: str
    blocks: list[Block]


SectionFn = Callable[[RunResult], "Section | None"]


def guarded(title: str, section: SectionFn, run: RunResult) -> Section | None:
    """One section on its own: one that fails is named with the reason and the others are
    still written (a report of a partial or older file is still a report)."""
    try:
        return section(run)
    except Exception as e:  # one broken section must not cost the whole report
        return Section(title, [Text(f"_This section could not be rendered: {first_line(e)}_")])
