"""report.html: one self-contained page (inline CSS and SVG, no script, no external URL).

Every piece of text that came from outside knee (group names, error samples, scenario strings,
machine fields) goes through `esc`; the only unescaped markup is knee's own and matplotlib's SVG.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from knee.analysis import words
from knee.model import RunRecord
from knee.report import plots
from knee.report import rows as R
from knee.report.escape import esc

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;
  color:#1d2430;background:#f6f7f9}
main{max-width:1000px;margin:0 auto;padding:24px 28px 60px;background:#fff;box-shadow:0 0 12px #0001}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid #e3e6ea;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}.meta{color:#5b6573;margin:0 0 12px}
.verdict{background:#eef5ff;border-left:4px solid #2f6fdb;padding:10px 14px;font-size:16px;margin:10px 0}
.warn{background:#fff6e0;border-left:4px solid #e0a100;padding:6px 12px;margin:6px 0}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{padding:3px 10px;border-bottom:1px solid #e3e6ea;text-align:right}th{background:#f0f2f5}
td:first-child,th:first-child,table.kv td,table.kv th{text-align:left}
tr.recovery td{color:#6b7480}tr.bad td{background:#fdecec}
figure.plot{margin:10px 0}figure.plot svg{max-width:100%;height:auto}
pre{background:#f4f5f7;padding:10px;overflow:auto;font-size:12px}code{font-size:12px}
"""


def _table(header: list[str], rows: list[list[str]], classes: list[str] | None = None, kind: str = "") -> str:
    attrs = f' class="{kind}"' if kind else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{esc(classes[i])}"' if classes and classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _figure(svg: str, caption: str) -> str:
    return f'<figure class="plot" aria-label="{esc(caption)}">{svg}</figure>'


def _errors(record: RunRecord, group: str) -> str:
    rows = []
    for s in record.steps:
        g = s.groups.get(group)
        if g is None:
            continue
        for cls, n in sorted(g.failures.items()):
            samples = g.error_samples.get(cls, [])
            level = words.level_rate(s.level) if s.rate_hz is not None else str(g.clients)
            rows.append([level, cls, f"{n:,}", " | ".join(samples[:3])])
    if not rows:
        return "<p>No failures.</p>"
    head = "Offered rate" if R.rate_sweep(record) else "Clients"
    return _table([head, "Class", "Count", "Samples"], rows, kind="kv")


def _group_section(record: RunRecord, group: str, run_dir: Path | None) -> str:
    out = [f"<h2>Group {esc(group)}</h2>"]
    v = R.verdict_for(record, group)
    if v is not None:
        out.append(f'<p class="verdict">{esc(R.verdict_sentence(v))}</p>')
        if (line := R.usl_line(v)) is not None:
            out.append(f"<p>{esc(line)}</p>")
    out += [f'<p class="warn">warning: {esc(w)}</p>' for w in R.warning_lines(record, group)]
    rows = R.rows_for(record, group)
    classes = ["recovery" if r.phase == "recovery" else ("bad" if r.failure_ratio > 0.5 else "") for r in rows]
    rates = R.rate_sweep(record)
    out.append(_table(R.table_header(record), [R.table_cells(r, rates) for r in rows], classes))
    x = "offered rate" if rates else "concurrency"
    if len({r.level if rates else r.clients for r in rows if r.phase == "sweep"}) >= 2:
        out.append(_figure(plots.throughput(record, group, v.usl if v else None), f"throughput vs {x}"))
        out.append(_figure(plots.failures(record, group), f"failures and hung vs {x}"))
        out.append(_figure(plots.latency(record, group), f"latency percentiles vs {x}"))
    out.append(_figure(plots.series(record, group), "per-interval series"))
    out.append(_figure(plots.distribution(record, group, run_dir), "latency distribution"))
    labels = R.label_rows(record, group)
    if labels:
        out += ["<h3>Per stage</h3>", _table(R.LABEL_HEADER, [R.label_cells(r) for r in labels])]
    for _, g in R.long_levels(record, group):
        d = R.interval_distribution(g)
        out += ["<h3>Per-interval distribution</h3>", f"<p>{esc(R.distribution_line(d))}</p>"]
        out.append(f"<pre>{esc(chr(10).join(R.text_histogram(d)))}</pre>")
    out += ["<h3>Failures</h3>", _errors(record, group)]
    return "\n".join(out)


def _scenario_text(record: RunRecord, run_dir: Path | None) -> str:
    if run_dir is not None:
        toml = run_dir / "scenario.toml"
        if toml.is_file():
            return toml.read_text(encoding="utf-8", errors="replace")
    return json.dumps(record.scenario, indent=2, sort_keys=True, default=str)


def render_html(record: RunRecord, run_dir: Path | None = None) -> str:
    created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record.created_unix))
    groups = "\n".join(_group_section(record, g, run_dir) for g in R.group_names(record)) or "<p>No steps yet.</p>"
    machine = dict(record.machine)
    machine.setdefault("knee_version", record.knee_version or "unknown")
    machine_rows = [[str(k), json.dumps(v) if not isinstance(v, str) else v] for k, v in sorted(machine.items())]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>knee report {esc(record.run_id)}</title>
<style>{_CSS}</style></head>
<body><main>
<h1>knee report: {esc(record.run_id)}</h1>
<p class="meta">status {esc(record.status)} · started {esc(created)} · knee {esc(record.knee_version or "?")} ·
{len(record.steps)} step{"" if len(record.steps) == 1 else "s"} · measured group {esc(record.measured_group)}</p>
{groups}
<h2>Scenario</h2>
<pre>{esc(_scenario_text(record, run_dir))}</pre>
<h2>Machine and versions</h2>
{_table(["Key", "Value"], machine_rows, kind="kv")}
</main></body></html>
"""
