"""`knee report RUN_DIR`: re-run the analysis on run.json and regenerate every report file, or (`--serve`) serve the
run's page and `/metrics` as the live page showed them at its end."""

from __future__ import annotations

from pathlib import Path

import click

from knee.report import render_terminal, write_reports
from knee.report.terminal import make_console
from knee.scenario.address import parse_serve
from knee.store import RunDir


@click.command(name="report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--keep-verdicts",
    is_flag=True,
    help="Use the verdicts stored in run.json instead of re-running the analysis.",
)
@click.option(
    "--serve",
    is_flag=True,
    help="Serve the run's page and Prometheus /metrics (as at the run's end) until Ctrl-C, instead of writing files.",
)
@click.option(
    "--listen",
    metavar="[HOST:]PORT",
    default="127.0.0.1:0",
    show_default=True,
    help="--serve: where to listen (port 0: any free port).",
)
def command(run_dir: Path, keep_verdicts: bool, serve: bool, listen: str) -> None:
    """Regenerate report.md, report.html, levels.csv and series.csv of RUN_DIR (a runs/<run-id> directory)
    from its run.json, and print the terminal report; or, with --serve, serve its page."""
    where = parse_serve(listen, "--listen")
    rd = RunDir(run_dir)
    record = rd.load()
    if not keep_verdicts:
        from knee.analysis import analyze_run

        record.verdicts = analyze_run(record)
    console = make_console()
    if serve and where is not None:
        from knee.live import start_live

        with start_live(where, record, rd.secrets, console, scenario_text=rd.scenario_text(), ended=True,
                        option="--listen", histograms=rd.histogram) as live:  # fmt: skip
            live.serve_forever()
        return
    render_terminal(record, console)
    for path in write_reports(rd, record):
        console.print(f"wrote {path}", highlight=False, markup=False)
