"""Reports of a run: terminal, report.md, report.html, levels.csv and series.csv.

`write_reports(run_dir, record)` writes the files into the run directory; `render_terminal(record,
console)` prints the table per group and the verdict. Each builds the view (`knee.report.view.build`)
once from the RunRecord and only formats it, so `knee report RUN_DIR` regenerates everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from knee.model import RunRecord
from knee.store import RunDir

if TYPE_CHECKING:
    from knee.report.terminal import render_terminal

__all__ = ["render_terminal", "write_reports"]


def __getattr__(name: str) -> Any:
    # Lazy: `knee run` imports knee.report.abtext without paying for the sweep reports (numpy, plots).
    if name == "render_terminal":
        from knee.report.terminal import render_terminal

        return render_terminal
    raise AttributeError(f"module 'knee.report' has no attribute {name!r}")


def write_reports(run_dir: RunDir, record: RunRecord) -> list[Path]:
    """Write report.md, report.html, levels.csv and series.csv into `run_dir`; return their paths."""
    from knee.report.csvout import levels_csv, series_csv
    from knee.report.html import render_html
    from knee.report.markdown import render_markdown
    from knee.report.view import build

    view = build(record, run_dir.scenario_text())
    return [
        run_dir.write_report("report.md", render_markdown(record, view)),
        run_dir.write_report("report.html", render_html(record, view)),
        run_dir.write_report("levels.csv", levels_csv(record, view)),
        run_dir.write_report("series.csv", series_csv(record)),
    ]
