"""Every relative link of the Markdown a clone carries resolves: README.md, docs/*.md and the
notes kept in results/ (a run folder's NOTE.md, README.md, profile.md). results/ keeps only
the runs these pages cite (a report is rebuilt by `roofbench report RUN`), so a run removed
while a page still cites it, or a report.md linked though no longer committed, fails here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
RESULTS_LIMIT_MB = 30


def pages() -> list[Path]:
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
        out.append(unquote(target.split("#", 1)[0]))
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


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken(page) == []


def tracked(under: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", under], cwd=ROOT, capture_output=True,
                         check=True).stdout.decode()
    return [ROOT / p for p in out.split("\0") if p]


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_results_is_small_enough_to_clone_and_carries_no_report():
    files = tracked("results")
    assert files, "no stored run: the tests that read results/ would have nothing"
    mb = sum(p.stat().st_size for p in files if p.exists()) / 2**20
    assert mb <= RESULTS_LIMIT_MB, f"results/ holds {mb:.1f} MB"
    # a report is a pure function of results.json: `roofbench report RUN` rebuilds it
    assert [p for p in files if p.name in ("report.html", "report.md")] == []
