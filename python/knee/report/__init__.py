"""Reports of a run: terminal, report.md, report.html, levels.csv and series.csv.

`write_reports(run_dir, record)` writes the files next to run.json; `render_terminal(record, console)`
prints the table per group and the verdict. Everything is computed from the RunRecord alone (plus the
step histograms in `steps/` when present), so `knee report RUN_DIR` regenerates it all.
"""

from __future__ import annotations

import os
from pathlib import Path

from knee.model import RunRecord
from knee.report.terminal import render_terminal

__all__ = ["render_terminal", "write_reports"]


def _write_atomic(path: Path, text: str) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_reports(run_dir: Path, record: RunRecord) -> list[Path]:
    """Write report.md, report.html, levels.csv and series.csv into `run_dir`; return their paths."""
    from knee.report.csvout import levels_csv, series_csv
    from knee.report.html import render_html
    from knee.report.markdown import render_markdown

    run_dir = Path(run_dir)
    return [
        _write_atomic(run_dir / "report.md", render_markdown(record)),
        _write_atomic(run_dir / "report.html", render_html(record, run_dir)),
        _write_atomic(run_dir / "levels.csv", levels_csv(record)),
        _write_atomic(run_dir / "series.csv", series_csv(record)),
    ]
