"""report.html: one self-contained page (inline CSS and SVG, no script, no external URL).

Every piece of text that came from outside knee (group names, error samples, scenario strings,
machine fields) goes through `esc`; the only unescaped markup is knee's own (the plots' SVG too:
knee.report.svgplot escapes their text).
"""

from __future__ import annotations

from knee.model import RunRecord
from knee.report.escape import esc
from knee.report.view import PAGE_PARTS, GroupView, ReportView, Section, Table, build

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;
  color:#1d2430;background:#f6f7f9}
main{max-width:1000px;margin:0 auto;padding:24px 28px 60px;background:#fff;box-shadow:0 0 12px #0001}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid #e3e6ea;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}.meta{color:#5b6573;margin:0 0 12px}
.verdict{background:#eef5ff;border-left:4px solid #2f6fdb;padding:10px 14px;margin:10px 0}
.verdict .headline{font-size:16px;font-weight:600;margin:0}.verdict ul{margin:6px 0 0;padding-left:20px}
.why{background:#f3edff;border-left:4px solid #7a4fd6;padding:6px 12px;margin:6px 0}
.warn{background:#fff6e0;border-left:4px solid #e0a100;padding:6px 12px;margin:6px 0}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{padding:3px 10px;border-bottom:1px solid #e3e6ea;text-align:right}th{background:#f0f2f5}
td:first-child,th:first-child,table.kv td,table.kv th{text-align:left}
tr.recovery td{color:#6b7480}tr.bad td{background:#fdecec}
figure.plot{margin:10px 0}figure.plot svg{max-width:100%;height:auto}
pre{background:#f4f5f7;padding:10px;overflow:auto;font-size:12px}code{font-size:12px}
.scroll{overflow-x:auto;max-width:100%}.scroll table:not(.kv) :is(th,td){white-space:nowrap}
p,li,h1,h2,h3{overflow-wrap:anywhere}
@media (max-width:600px){main{padding:12px 10px 40px}th,td{padding:3px 6px}}
"""


def _table(t: Table) -> str:
    attrs = ' class="kv"' if t.kv else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in t.header)
    body = []
    for i, row in enumerate(t.rows):
        style = t.styles[i] if t.styles else ""
        cls = f' class="{esc(style)}"' if style else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    table = f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="scroll">{table}</div>'  # a wide table scrolls in its own box, not the page


def _figure(svg: str, caption: str) -> str:
    return f'<figure class="plot" aria-label="{esc(caption)}">{svg}</figure>'


# How each style of line is marked on the page
_CLASSES = {"verdict": "verdict", "why": "why", "warning": "warn"}
_LABELS = {"warning": "warning: "}


def _section(s: Section) -> list[str]:
    """An `h3` title (when the section has one), its lines as paragraphs, its preformatted block and its table
    (or its `empty` words); nothing for a section without content and without those words."""
    if s.blank and not s.empty:
        return []
    out = [f"<h3>{esc(s.title)}</h3>"] if s.title else []
    cls = f' class="{_CLASSES[s.style]}"' if s.style else ""
    if s.style == "verdict":  # the headline, then its points
        points = "".join(f"<li>{esc(line)}</li>" for line in s.lines[1:])
        out.append(f'<div class="verdict"><p class="headline">{esc(s.lines[0])}</p>')
        out.append(f"<ul>{points}</ul></div>" if points else "</div>")
    else:
        out += [f"<p{cls}>{_LABELS.get(s.style, '')}{esc(line)}</p>" for line in s.lines]
    if s.pre:
        out.append(f"<pre>{esc(chr(10).join(s.pre))}</pre>")
    if s.table is not None:
        out.append(_table(s.table) if s.table.rows else f"<p>{esc(s.empty)}</p>")
    return out


def _plots(g: GroupView, record: RunRecord, rates: bool) -> list[str]:
    """The group's figures, drawn from `record`: the curves (with two levels or more), the series, the latency
    distribution."""
    from knee.report import plots  # here: the plots import the analysis (numpy, scipy), which the live page's CSS not

    out = []
    v = next((x for x in record.verdicts if x.group == g.name), None)
    x = "offered rate" if rates else "concurrency"
    if g.plot_levels >= 2:
        flat = v is not None and v.flat  # a pool's or a plateau's N*, and the model past it, are not drawn
        fit = plots.throughput(record, g.name, v.usl if v else None, flat=flat)  # a disowned fit is null
        out.append(_figure(fit, f"throughput vs {x}"))
        out.append(_figure(plots.failures(record, g.name), f"failures and hung vs {x}"))
        out.append(_figure(plots.latency(record, g.name), f"latency percentiles vs {x}"))
        if g.section("counters") is not None:
            out.append(_figure(plots.counters(record, g.name), f"machine and target counters beside throughput vs {x}"))
        if g.section("remote") is not None:
            out.append(_figure(plots.remote(record, g.name), f"the target's machines beside throughput vs {x}"))
    if v is not None and v.ramp is not None:
        out.append(
            _figure(plots.ramp(record, g.name, v.ramp), "the ramp: achieved vs offered rate, interval by interval")
        )
    if v is not None and v.client_ramp is not None:
        what = "the clients ramp: achieved rate vs clients, interval by interval"
        out.append(_figure(plots.client_ramp(record, g.name, v.client_ramp), what))
    if v is not None and v.soak is not None:
        out.append(_figure(plots.soak(record, g.name, v.soak), "the soak: its intervals and their trends"))
    else:
        out.append(_figure(plots.series(record, g.name), "per-interval series"))
    out.append(_figure(plots.distribution(record, g.name), "latency distribution"))
    return out


def _group_section(g: GroupView, record: RunRecord, rates: bool) -> str:
    """The group's sections ordered by their place on the page (`Section.page`), the plots after the table."""
    out = [f"<h2>Group {esc(g.name)}</h2>"]
    after_table = PAGE_PARTS.index("table")
    figures: list[str] | None = _plots(g, record, rates)
    for s in sorted(g.sections, key=Section.page_rank):
        if figures is not None and s.page_rank() > after_table:
            out += figures
            figures = None
        out += _section(s)
    out += figures or []
    return "\n".join(out)


def report_body(record: RunRecord, view: ReportView | None = None) -> str:
    """What the page shows inside `<main>`: the title, each group's sections and plots, the scenario, the machine
    (the live page, knee.live, shows the same between its own parts)."""
    view = view or build(record)
    groups = "\n".join(_group_section(g, record, view.rates) for g in view.groups) or "<p>No steps yet.</p>"
    return f"""<h1>knee report: {esc(view.run_id)}</h1>
<p class="meta">status {esc(view.status)} · started {esc(view.created)} · knee {esc(view.knee_version)} ·
{view.steps} step{"" if view.steps == 1 else "s"} · measured group {esc(view.measured_group)} ·
ran on {esc(view.executor)}</p>
{groups}
<h2>Scenario</h2>
<pre>{esc(view.scenario_text)}</pre>
<h2>Machine and versions</h2>
{_table(Table(["Key", "Value"], view.machine, kv=True))}"""


def body_of(page: str) -> str | None:
    """What `render_html` put inside `<main>` (`report_body`'s text), read back from a page it wrote; None when
    `page` is not one of them."""
    start, end = page.find("<body><main>\n"), page.rfind("\n</main></body>")
    return page[start + len("<body><main>\n") : end] if 0 <= start < end else None


def render_html(record: RunRecord, view: ReportView | None = None) -> str:
    """The page of `record` (its view built once by the caller, or here); the plots are drawn from `record`."""
    view = view or build(record)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>knee report {esc(view.run_id)}</title>
<style>{CSS}</style></head>
<body><main>
{report_body(record, view)}
</main></body></html>
"""
