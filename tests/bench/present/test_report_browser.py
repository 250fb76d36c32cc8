"""report.html in a real browser: Debian's chromium, driven by Selenium through chromedriver.

Every network request is blocked (Chrome DevTools' Network.setBlockedURLs for http/https/ws,
and a proxy that goes nowhere) and the request log is read back: the page must load from its
own bytes alone. Then: no console error, the number of points drawn, the hover text of one
point, a legend click that hides its roof (model and pixels), a screenshot that is not blank.
`ROOFBENCH_UPDATE_DOCS=1` also writes the screenshot to docs/report-html.png for the README.
Skipped, with the reason, where chromium, chromedriver, selenium or bokeh is missing (.ci/run
installs chromium and chromium-driver from Debian).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from patience import patience
from roofbench.bench.present.deltas import compare
from roofbench.bench.results import load_run
from testpaths import H200_RUNS, ROOT

from roofbench.units import si

GEMM = H200_RUNS["gemm-4096"]
CPU = sorted((ROOT / "results" / "amd-epyc").glob("*/results.json"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def _missing() -> str | None:
    if not CHROMIUM:
        return "chromium is not installed (Debian: apt-get install chromium; .ci/run does it)"
    if not CHROMEDRIVER:
        return "chromedriver is not installed (Debian: apt-get install chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install roofbench[dev])"
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return "bokeh is not installed (pip install roofbench[report])"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")

WALK = """
function walk(root, acc) {
  for (const el of root.querySelectorAll('*')) {
    acc.push(el);
    if (el.shadowRoot) walk(el.shadowRoot, acc);
  }
  return acc;
}
"""
PLOT_VIEW = """
const view = [...Bokeh.index.roots].find(v => v.model.name === 'roofline');
"""


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1560,1100", "--force-device-scale-factor=1",
                "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
                "--no-first-run", "--disable-extensions", "--disable-background-networking"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.execute_cdp_cmd("Network.enable", {})
    drv.execute_cdp_cmd("Network.setBlockedURLs",
                        {"urls": ["http://*", "https://*", "ws://*", "wss://*"]})
    yield drv
    drv.quit()


def _open(drv, page: Path) -> None:
    drv.get_log("browser")  # drain what earlier pages logged
    drv.get_log("performance")
    drv.get(page.as_uri())
    deadline = time.monotonic() + patience(30)
    while time.monotonic() < deadline:
        if drv.execute_script("return !!(window.Bokeh && Bokeh.index && "
                              "[...Bokeh.index.roots].some(v => v.model.name === 'roofline')"
                              " && document.readyState === 'complete')"):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the Bokeh roofline never rendered")
    time.sleep(0.5)  # the first paint after the document is idle


def _requests(drv) -> list[str]:
    urls = []
    for entry in drv.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def _pixels(drv):
    from PIL import Image

    return Image.open(io.BytesIO(drv.get_screenshot_as_png())).convert("RGB")


def _page_xy(drv, x: float, y: float) -> tuple[float, float]:
    return tuple(drv.execute_script(PLOT_VIEW + """
const r = view.canvas_view.el.getBoundingClientRect();
return [r.left + view.frame.x_scale.compute(arguments[0]),
        r.top + view.frame.y_scale.compute(arguments[1])];""", x, y))


def _mouse(drv, kind: str, x: float, y: float) -> None:
    drv.execute_cdp_cmd("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                     "button": "left", "clickCount": 1})


def _darkest(img, x: float, y: float, r: int = 1) -> int:
    return min(sum(img.getpixel((int(x) + dx, int(y) + dy)))
               for dx in range(-r, r + 1) for dy in range(-r, r + 1))


@pytest.fixture(scope="module")
def gemm_page(tmp_path_factory) -> Path:
    from roofbench.bench.present.report_html import render_html

    page = tmp_path_factory.mktemp("html") / "report.html"
    page.write_text(render_html(load_run(GEMM)))
    return page


def test_page_loads_offline_without_console_errors(browser, gemm_page: Path):
    _open(browser, gemm_page)
    urls = _requests(browser)
    assert urls and urls[0].startswith("file://")
    remote = [u for u in urls if not u.startswith(("file:", "data:", "blob:", "about:"))]
    assert remote == [], f"the page asked the network for {remote}"
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    assert browser.title.startswith("roofbench report: NVIDIA H200")


def test_every_valid_case_is_one_drawn_point(browser, gemm_page: Path):
    _open(browser, gemm_page)
    n_valid = sum(1 for c in load_run(GEMM).cases if c.valid and c.outcome.status == "ok")
    drawn = browser.execute_script(PLOT_VIEW + """
let n = 0;
for (const rv of view.renderer_views.values()) {
  if (!(rv.model.name || '').startsWith('points:') || !rv.model.visible) continue;
  const sx = rv.glyph.sx, sy = rv.glyph.sy;
  for (let i = 0; i < sx.length; i++) if (isFinite(sx[i]) && isFinite(sy[i])) n++;
}
return n;""")
    assert n_valid == 9 and drawn == n_valid


def test_hover_shows_the_numbers_of_the_point(browser, gemm_page: Path):
    _open(browser, gemm_page)
    case = next(
        c
        for c in load_run(GEMM).cases
        if c.identity.variant == "library" and c.identity.dtype == "fp32"
    )
    x, y = _page_xy(browser, case.declaration.ai["dram"], case.roofline.flop_per_s)
    _mouse(browser, "mouseMoved", x - 30, y - 30)
    _mouse(browser, "mouseMoved", x, y)
    text = ""
    deadline = time.monotonic() + patience(5)
    while time.monotonic() < deadline and "library" not in text:
        time.sleep(0.2)
        text = browser.execute_script(WALK + """
return walk(document, []).filter(e => /bk-tooltip-content/.test(e.className))
  .map(e => e.innerText).join('\\n');""")
    for want in (
        "gemm/library fp32",
        "4096x4096x4096",
        si(case.roofline.flop_per_s, "FLOP/s"),
        si(case.roofline.bytes_per_s["dram"], "B/s"),
        f"{case.declaration.ai['dram']:.4g} FLOP/B",
        f"{case.roofline.efficiency:.1%}",
        case.roofline.bound,
        case.roofline.limiting_roof,
    ):
        assert want in text, f"{want!r} not in the tooltip {text!r}"
    for field in ("time", "FLOP/s", "B/s", "AI", "efficiency", "bound", "roof", "size"):
        assert field in text


def test_legend_click_hides_its_roof(browser, gemm_page: Path):
    _open(browser, gemm_page)
    run = load_run(GEMM)
    bw = run.roofs.memory("dram", "measured").value
    label = f"DRAM/HBM {si(bw, 'B/s')}"
    (x0, _), _ = browser.execute_script(PLOT_VIEW + """
return [[view.frame.x_scale.source_range.start, 0], 0];""")
    px, py = _page_xy(browser, x0 * 3, bw * x0 * 3)  # on the line, far from every point
    assert _darkest(_pixels(browser), px, py) < 200, "the DRAM roof is not drawn there"
    item = browser.execute_script(WALK + """
const it = walk(document, []).find(e => /\\bbk-item\\b/.test(e.className)
                                    && e.textContent.trim() === arguments[0]);
if (!it) return null;
const r = it.getBoundingClientRect();
return [r.left + r.width / 2, r.top + r.height / 2];""", label)
    assert item is not None, f"no legend entry {label!r}"

    def visible() -> bool:
        return browser.execute_script(PLOT_VIEW + """
return [...view.renderer_views.values()].find(
  rv => rv.model.name === 'roof:measured:dram').model.visible;""")

    assert visible()
    _mouse(browser, "mousePressed", *item)
    _mouse(browser, "mouseReleased", *item)
    time.sleep(0.5)
    assert not visible()
    assert _darkest(_pixels(browser), px, py) > 500, "the roof is still painted after the click"
    _mouse(browser, "mousePressed", *item)  # and a second click brings it back
    _mouse(browser, "mouseReleased", *item)
    time.sleep(0.5)
    assert visible()


def test_screenshot_is_not_blank(browser, gemm_page: Path, tmp_path: Path):
    _open(browser, gemm_page)
    img = _pixels(browser)
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50
    non_white = sum(n for n, c in colours if sum(c) < 700)
    assert non_white > 0.02 * img.width * img.height
    out = tmp_path / "report-html.png"
    img.save(out)
    if os.environ.get("ROOFBENCH_UPDATE_DOCS") == "1":
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copyfile(out, ROOT / "docs" / "report-html.png")


def test_compare_page_joins_the_two_points_of_each_case(browser, tmp_path: Path):
    from roofbench.bench.present.report_html import render_compare_html

    a, b = load_run(CPU[0]), load_run(CPU[1])
    page = tmp_path / "compare.html"
    page.write_text(render_compare_html(a, b, compare(a, b)))
    _open(browser, page)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    n = browser.execute_script(PLOT_VIEW + """
const out = {points: 0, joins: 0};
for (const rv of view.renderer_views.values()) {
  const name = rv.model.name || '';
  if (name.startsWith('points:')) out.points += rv.model.data_source.get_length();
  if (name === 'joins') out.joins = rv.model.data_source.get_length();
}
return out;""")
    both = {c.key for c in a.cases if c.valid} & {c.key for c in b.cases if c.valid}
    assert n["joins"] == len(both) > 0
    assert n["points"] == sum(c.valid for c in a.cases) + sum(c.valid for c in b.cases)
