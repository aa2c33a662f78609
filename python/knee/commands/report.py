"""`knee report RUN_DIR`: re-run the analysis on run.json and regenerate every report file."""

from __future__ import annotations

from pathlib import Path

import click

from knee.report import render_terminal, write_reports
from knee.report.terminal import make_console
from knee.store import RunDir


@click.command(name="report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--keep-verdicts",
    is_flag=True,
    help="Use the verdicts stored in run.json instead of re-running the analysis.",
)
def command(run_dir: Path, keep_verdicts: bool) -> None:
    """Regenerate report.md, report.html, levels.csv and series.csv of RUN_DIR (a runs/<run-id> directory)
    from its run.json, and print the terminal report."""
    rd = RunDir(run_dir)
    record = rd.load()
    if not keep_verdicts:
        from knee.analysis import analyze_run

        record.verdicts = analyze_run(record)
    console = make_console()
    render_terminal(record, console)
    for path in write_reports(rd, record):
        console.print(f"wrote {path}", highlight=False, markup=False)
