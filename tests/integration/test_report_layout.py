"""report.html and the live page laid out by headless Chromium at a desktop's 1280 px and a phone's 390 px: nothing
overflows (the page never scrolls sideways, every element stays inside the page's column unless it sits in a box of
its own that scrolls, as a wide table does), nothing overlaps (the page's parts — plots, tables, the verdict, the
paragraphs — and the texts inside each plot: tick labels, axis labels, titles, legends).

One real sweep serves the module: `knee sweep --serve` drives `knee target` over levels 1 to 24 (a log-scale axis)
with a background group beside it that nginx refuses (401), so the pages hold every part a user meets: the level
table, the per-step tables of the live page, the failure reasons, the plots and the background group's verdict.
Each check saves a full-page screenshot under the test's tmp dir and names it in its failure message.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from knee.demo_target import TargetProcess, start_target
from knee.store import RunDir

from browser import Browser
from servers import Nginx, free_port, kill_if_running, wait_for_http

# Alone (make test-py runs it with nothing beside it): a browser watching a live sweep's steps as they happen.
pytestmark = pytest.mark.alone

WIDTHS = {"desktop": (1280, False), "phone": (390, True)}

SCENARIO = """\
name = "layout"
[groups.main]
kind = "http"
url = "{target}/"
clients = "level"
[groups.beside]
kind = "http"
url = "{nginx}/echo-credentials"
clients = 1
background = true
think = "0.25s"
[sweep]
levels = [1, 4, 24]
duration = "2s"
[recovery]
enabled = false
[serve]
address = "127.0.0.1:{port}"
linger = "5s"
"""

# The layout's problems in words (none: an empty list). Everything inside an element that scrolls sideways on its
# own (a table's box, a preformatted block) may be as wide as it likes; nothing else may stick out of the page's
# column; the page's parts may not overlap, nor the texts of one plot.
LAYOUT = r"""
(() => {
  const problems = [];
  const shown = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const name = (el) => {
    const label = el.getAttribute('aria-label') || el.id || (typeof el.className === 'string' ? el.className : '');
    return `<${el.tagName.toLowerCase()}${label ? ' ' + label : ''}> "${(el.textContent || '').trim().slice(0, 50)}"`;
  };
  const scrolls = (el) => {
    for (let p = el.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll') return true;
    }
    return false;
  };
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 &&
    Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth) {
    problems.push(`the page scrolls sideways: ${root.scrollWidth} px wide in ${root.clientWidth} px`);
  }
  const main = document.querySelector('main');
  const box = main.getBoundingClientRect(), style = getComputedStyle(main);
  const left = box.left + parseFloat(style.paddingLeft) - 0.5, right = box.right - parseFloat(style.paddingRight) + 0.5;
  for (const el of main.querySelectorAll('*')) {
    if ((el.closest('svg') && el.tagName.toLowerCase() !== 'svg') || !shown(el) || scrolls(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.left < left || r.right > right)) {
      problems.push(`${name(el)} sticks out of the page's column: ${r.left.toFixed(0)}–${r.right.toFixed(0)} px ` +
        `in ${left.toFixed(0)}–${right.toFixed(0)} px`);
    }
    const css = getComputedStyle(el);
    if (css.overflowX === 'visible' && css.display !== 'inline' && el.clientWidth > 0 &&
        el.scrollWidth > el.clientWidth + 1) {
      problems.push(`${name(el)}: its content is ${el.scrollWidth} px wide in ${el.clientWidth} px`);
    }
  }
  const PARTS = 'figure.plot, div.scroll, table, div.verdict, pre, h1, h2, h3, p, ul, #chart';
  const parts = Array.from(main.querySelectorAll(PARTS))
    .filter((el) => shown(el) && !el.parentElement.closest('figure.plot, div.scroll, div.verdict, pre, p, ul'));
  const rects = parts.map((el) => el.getBoundingClientRect());
  for (let i = 0; i < parts.length; i++) {
    for (let j = i + 1; j < parts.length; j++) {
      if (overlap(rects[i], rects[j])) problems.push(`${name(parts[i])} overlaps ${name(parts[j])}`);
    }
  }
  let svgs = 0;
  for (const svg of main.querySelectorAll('svg')) {
    if (!shown(svg)) continue;
    svgs++;
    const what = svg.closest('figure') || svg;
    const texts = Array.from(svg.querySelectorAll('text')).filter((t) => shown(t) && t.textContent.trim());
    const boxes = texts.map((t) => t.getBoundingClientRect());
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        if (overlap(boxes[i], boxes[j])) {
          problems.push(`in ${name(what).slice(0, 60)}: "${texts[i].textContent.trim()}" overlaps ` +
            `"${texts[j].textContent.trim()}"`);
        }
      }
    }
  }
  return {problems, svgs, tables: main.querySelectorAll('table').length};
})()
"""


@dataclass
class Seen:
    """What one look at a page at one width found."""

    page: str
    width: int
    problems: list[str]
    svgs: int
    tables: int
    screenshot: Path


def _look(browser: Browser, page: str, shots: Path) -> list[Seen]:
    """The page open in `browser` laid out at each width (WIDTHS): its problems, counts and a full screenshot."""
    out = []
    for device, (width, mobile) in WIDTHS.items():
        browser.resize(width, 900, mobile)
        # the layout viewport at the new width (less a scrollbar's width: 15 px on the desktop)
        browser.wait(f"(w => w <= {width} && w > {width} - 20)(document.documentElement.clientWidth)", 10)
        seen = browser.eval(LAYOUT)
        shot = shots / f"{page}-{device}-{width}.png"
        browser.screenshot(shot, full=True)
        out.append(Seen(page, width, seen["problems"], seen["svgs"], seen["tables"], shot))
    return out


@pytest.fixture(scope="module")
def looks(nginx: Nginx, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Seen], Path]]:
    """The live page mid-run and at the end, and report.html, each at both widths; and the run's directory."""
    tmp = tmp_path_factory.mktemp("layout")
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    target: TargetProcess
    with start_target("basic") as target:
        (tmp / "layout.toml").write_text(SCENARIO.format(target=target.url, nginx=nginx.url, port=port))
        browser = Browser()
        sweep = subprocess.Popen(
            [sys.executable, "-m", "knee", "sweep", str(tmp / "layout.toml"), "--out", str(tmp / "runs")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            wait_for_http(base + "metrics", 30)
            browser.open(base)
            # mid-run: a step running (its tables and chart) after a first step's report (its table, plots)
            browser.wait("window.knee && window.knee.state.step && window.knee.state.steps_done >= 1", 60)
            browser.wait("document.querySelectorAll('#report svg').length >= 1", 30)
            seen = _look(browser, "live", tmp)
            browser.wait("document.body.dataset.ended === 'true'", 120)
            seen += _look(browser, "live-ended", tmp)
            out, _ = sweep.communicate(timeout=120)
            assert sweep.returncode == 0, out
            (run,) = (tmp / "runs").iterdir()
            browser.open((run / "report.html").resolve().as_uri())
            seen += _look(browser, "report", tmp)
            yield seen, run
        finally:
            kill_if_running(sweep)
            browser.close()


def test_nothing_overflows_or_overlaps_at_desktop_and_phone_widths(looks: tuple[list[Seen], Path]) -> None:
    seen, _ = looks
    assert [(s.page, s.width) for s in seen] == [
        (page, width) for page in ("live", "live-ended", "report") for width, _ in WIDTHS.values()
    ]
    for s in seen:
        # the checks had something to check: the plots and the tables are on the page
        assert s.svgs >= 5 and s.tables >= 3, f"{s.page} at {s.width} px: {s.svgs} plots, {s.tables} tables"
        assert s.screenshot.stat().st_size > 20_000, s.screenshot
    bad = [f"{s.page} at {s.width} px (screenshot {s.screenshot}):\n  " + "\n  ".join(s.problems) for s in seen]
    assert not [s for s in seen if s.problems], "\n".join(b for b, s in zip(bad, seen, strict=True) if s.problems)


def test_the_background_groups_verdict_reads_as_english(looks: tuple[list[Seen], Path]) -> None:
    """issue 37: not "0 Hz beside main at 2 clients; errors from beside main at 2 clients" but how its operations
    ended beside the stress levels, with nginx's refusal named; its counts are run.json's, the headline of its
    verdict in every report."""
    _, run = looks
    record = RunDir(run).load()
    steps = [s.groups["beside"] for s in record.steps if s.phase == "sweep" and "beside" in s.groups]
    failed = sum(g.failed for g in steps)
    assert failed > 0 and sum(g.succeeded for g in steps) == 0
    (v,) = [v for v in record.verdicts if v.group == "beside"]
    said = f"beside 1 to 24 clients of main: 0 succeeded, {failed:,} failed (401 Unauthorized)"
    assert v.sentences[0] == said, v.sentences
    assert f"**Verdict:** {said}\n" in (run / "report.md").read_text()
    assert f'<p class="headline">{said}</p>' in (run / "report.html").read_text()


def test_the_checker_sees_a_page_that_overflows_and_overlaps(tmp_path: Path) -> None:
    """The same check on a page that overflows and overlaps: proves the assertions above can fail."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width, initial-scale=1"></head>'
        '<body style="margin:0"><main style="padding:0 10px">'
        '<table><tr><td style="white-space:nowrap">' + "wide cell " * 80 + "</td><td>x</td></tr></table>"
        '<p style="margin-top:-40px">a paragraph over the table</p>'
        '<svg width="300" height="60"><text x="10" y="30">one label</text><text x="20" y="32">another</text></svg>'
        "</main></body></html>"
    )
    browser = Browser()
    try:
        browser.open(page.resolve().as_uri())
        (seen,) = [s for s in _look(browser, "bad", tmp_path) if s.width == 390]
    finally:
        browser.close()
    said = "\n".join(seen.problems)
    assert "the page scrolls sideways" in said, said
    assert "sticks out of the page's column" in said and "<table>" in said, said
    assert '<p> "a paragraph over the table" overlaps' in said or 'overlaps <p> "a paragraph' in said, said
    assert '"one label" overlaps "another"' in said, said
    assert seen.screenshot.is_file()
