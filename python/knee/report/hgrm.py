"""Read the latency histograms a run directory keeps (`steps/<n>-<group>.hgrm`, HdrHistogram V2 deflate)."""

from __future__ import annotations

import base64
from pathlib import Path

PERCENTILES = (0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 100.0)


def hgrm_path(run_dir: Path, step_index: int, group: str) -> Path:
    return run_dir / "steps" / f"{step_index}-{group}.hgrm"


def percentiles_from_hgrm(data: bytes) -> list[tuple[float, float]]:
    """(percentile, milliseconds) points of an encoded histogram whose values are microseconds."""
    from hdrh.histogram import HdrHistogram

    h = HdrHistogram.decode(base64.b64encode(data), b64_wrap=True)
    if h.get_total_count() == 0:
        return []
    return [(q, h.get_value_at_percentile(q) / 1000.0) for q in PERCENTILES]


def read_percentiles(run_dir: Path, step_index: int, group: str) -> list[tuple[float, float]] | None:
    """The step's latency percentiles from its histogram file, or None when it is missing or unreadable."""
    path = hgrm_path(run_dir, step_index, group)
    if not path.is_file():
        return None
    try:
        return percentiles_from_hgrm(path.read_bytes())
    except Exception:  # a damaged file falls back to the summary's percentiles (hdrh raises many kinds)
        return None
