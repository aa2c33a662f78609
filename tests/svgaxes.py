"""The tick labels of a report plot's axes, for the tests that read them: knee.report.svgplot writes each axis as a
group, `<g class="xaxis">`, `"yaxis"` (the left one) and `"yaxis right"`."""

from __future__ import annotations

import re


def tick_labels(svg: str, axis: str = "xaxis") -> list[str]:
    """The labels of the plot's `axis`, as written."""
    part = re.search(rf'<g class="{axis}">(.*?)</g>', svg, re.S)
    assert part, f"no {axis} in {svg[:200]}"
    return [re.sub(r"<[^>]+>", "", t).strip() for t in re.findall(r"<text[^>]*>(.*?)</text>", part[1], re.S)]


def tick_numbers(svg: str, axis: str = "xaxis") -> list[float]:
    """The labels of the plot's `axis` that are plain numbers (48, 1,000, 0.25), as numbers."""
    return [float(t.replace(",", "")) for t in tick_labels(svg, axis) if re.fullmatch(r"[\d.,]+", t)]
