"""Run records of request mixes and data sources, built from real engine runs against the tests' nginx.

`mix_record(nginx_url, levels)` runs the engine once per level with a 9:1 mix of `read` (GET /read, nginx's 200)
and `write` (POST /missing, nginx's 404: it fails while `read` holds), and returns the RunRecord a sweep would
write, its verdicts computed by the analysis. `data_record(...)` runs a queue of rows that runs out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knee.analysis import analyze_run
from knee.engine import summary
from knee.model import DataUse, GroupStats, RunRecord, StepResult
from knee.scenario import parse_scenario

from servers import http_spec, run_spec

T0 = 1_795_000_000.0
NO_END = 2**63 - 1  # a data range's open end (the engine's)


def mix_requests(url: str, write: str = "/missing", write_method: str = "POST") -> list[dict[str, Any]]:
    return [
        {"name": "read", "weight": 9, "url": f"{url}/read"},
        {"name": "write", "weight": 1, "method": write_method, "body": "x", "url": f"{url}{write}"},
    ]


def engine_step(index: int, level: int, spec: dict[str, Any]) -> StepResult:
    """Run `spec` (one group "main") and keep its result as a sweep step at `level`."""
    spec = {**spec, "threads": 1}
    s = summary(run_spec(spec))
    groups = {g.name: GroupStats.from_engine(g, s.interval_s) for g in s.groups}
    return StepResult(
        index=index,
        level=level,
        started_unix=T0 + 10 * index,
        elapsed_s=s.elapsed_s,
        groups=groups,
        data=[DataUse.from_engine(d) for d in s.data],
        spec=spec,
    )


def record_of(url: str, steps: list[StepResult], mix: bool = True, run_id: str = "mix") -> RunRecord:
    levels = sorted({int(s.level) for s in steps})
    requests = (
        '[[groups.main.requests]]\nname = "read"\nweight = 9\nurl = "/read"\n'
        '[[groups.main.requests]]\nname = "write"\nmethod = "POST"\nbody = "x"\nurl = "/missing"\n'
        if mix
        else ""
    )
    sc = parse_scenario(
        f'name = "{run_id}"\nseed = 1\n[groups.main]\nkind = "http"\nurl = "{url}/read"\nclients = "level"\n'
        f'{requests}[sweep]\nlevels = {levels}\nduration = "1s"\n'
    )
    record = RunRecord(run_id=run_id, created_unix=T0, status="complete", scenario=sc, steps=steps)
    record.verdicts = analyze_run(record)
    return record


def mix_record(url: str, levels: tuple[int, ...] = (1, 4), n: int = 2000, **kw: Any) -> RunRecord:
    """A sweep of a 9:1 mix over `levels`, `n` operations each (`kw`: mix_requests' write path and method)."""
    steps = []
    for i, level in enumerate(levels):
        spec = http_spec(f"{url}/read", level, {"total": n})
        spec["groups"][0]["client"]["requests"] = mix_requests(url, **kw)
        spec["seed"] = 1
        steps.append(engine_step(i, level, spec))
    return record_of(url, steps, run_id=kw.get("write", "mix").strip("/") or "mix")


FED_WINDOW_S = 6.0  # data_record's planned window for its steps fed from the queue


def data_record(url: str, users: Path, rows: int) -> RunRecord:
    """Three levels: 1 client without data for 2 s, then 2 clients taking `rows` rows of a queue of users (it runs
    out long before the step's planned FED_WINDOW_S), then 4 clients finding none left."""
    users.write_text("id\n" + "".join(f"{i}\n" for i in range(rows)))
    plain = engine_step(0, 1, http_spec(f"{url}/read", 1, {"duration_ms": 2000}))
    fed = []
    for i, (level, ranges) in enumerate(((2, None), (4, [[rows, NO_END]])), 1):
        spec = http_spec(url + "/u/${users.id}", level, {"duration_ms": round(FED_WINDOW_S * 1000)})
        source: dict[str, Any] = {"name": "users", "file": str(users), "order": "queue"}
        spec["data"] = [{**source, "ranges": ranges} if ranges else source]
        fed.append(engine_step(i, level, spec))
    return record_of(url, [plain, *fed], mix=False, run_id="users")
