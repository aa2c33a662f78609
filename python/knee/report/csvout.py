"""levels.csv (one row per step x group, and per step x request of a mix) and series.csv (one row per interval)."""

from __future__ import annotations

import csv
import io

from knee.analysis.run import group_names
from knee.model import RunRecord
from knee.report.view import ReportView, build

SERIES_COLUMNS = ["step", "group", "t", "succeeded", "failed", "hung", "offered", "late", "lagged", "dropped"]
SERIES_COLUMNS += ["p50_ms", "p99_ms"]


def _fmt(v: object) -> object:
    if v is None:  # an open-loop column of a closed-loop group, a phase the operations did not have
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def levels_csv(record: RunRecord, view: ReportView | None = None) -> str:
    view = view or build(record)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(view.level_columns)
    for r in view.csv_rows:
        w.writerow([_fmt(v) for v in r.as_dict(view.open_loop).values()])
    return buf.getvalue()


def series_csv(record: RunRecord) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SERIES_COLUMNS)
    names = group_names(record)
    for s in record.steps:
        for n in names:
            if n not in s.groups:
                continue
            for p in s.groups[n].series:
                counts = [p.succeeded, p.failed, p.hung, p.offered, p.late, p.lagged, p.dropped]
                w.writerow([s.index, n, _fmt(p.t), *counts, _fmt(p.p50_ms), _fmt(p.p99_ms)])
    return buf.getvalue()
