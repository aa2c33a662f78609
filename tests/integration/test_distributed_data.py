"""Data sources on many load machines (issue 36, item 5; docs/distributed.md "How a step is split"), held against
nginx's log: on `--cluster local:2` (two real Dask worker processes) a queue is cut into a part per worker, each id
reaches nginx exactly once across the two, a sweep's steps take disjoint rows, and the step that ran out names the
worker whose part ran out first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import knee_cli
from dask_cluster import need
from servers import Nginx

need("distributed")


def _ids(tmp: Path, n: int) -> Path:
    path = tmp / "ids.csv"
    path.write_text("id,name\n" + "".join(f"{i},user{i}\n" for i in range(n)))
    return path


def _record(out: Path) -> dict[str, Any]:
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return json.loads((run / "run.json").read_text())


def _paths(nginx: Nginx) -> list[str]:
    """The path of every GET nginx answered 200 since its log was cleared, in the order it answered them."""
    return [f[2] for f in (line.split() for line in nginx.access_lines()) if f[1] == "GET" and f[3] == "200"]


def _ids_of(paths: list[str]) -> set[int]:
    return {int(p.removeprefix("/u/")) for p in paths}


def test_a_queue_on_two_workers_reaches_nginx_each_row_exactly_once(nginx: Nginx, tmp_path: Path) -> None:
    ids = _ids(tmp_path, 5000)
    nginx.clear_log()
    r = knee_cli(
        "run", f"{nginx.url}/u/${{ids.id}}", "--data", f"ids={ids}", "--data-order", "queue",
        "-c", "20", "-n", "5000", "--cluster", "local:2", "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    seen = _paths(nginx)
    assert sorted(seen) == sorted(f"/u/{i}" for i in range(5000))  # each id once across the fleet, none missing
    step = _record(tmp_path / "runs")["steps"][0]
    assert step["groups"]["main"]["succeeded"] == len(nginx.access_lines()) == 5000
    assert sorted((w["clients"], w["succeeded"]) for w in step["workers"]) == [(10, 2500), (10, 2500)]
    (use,) = step["data"]
    assert (use["rows"], use["available"], use["taken"], use["used"]) == (5000, 5000, 5000, 5000)
    assert (use["exhausted_after_s"], use["first_out"]) == (None, None)


def test_a_sweep_on_two_workers_takes_disjoint_parts_and_names_the_worker_out_first(
    nginx: Nginx, tmp_path: Path
) -> None:
    ids = _ids(tmp_path, 150)
    nginx.clear_log()
    r = knee_cli(
        "sweep", f"{nginx.url}/u/${{ids.id}}", "--data", f"ids={ids}", "--data-order", "queue",
        "--levels", "2,4", "-n", "100", "--no-recovery", "--cluster", "local:2", "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert r.returncode in (0, 3), r.stdout + r.stderr
    steps = _record(tmp_path / "runs")["steps"]
    assert [s["groups"]["main"]["succeeded"] for s in steps] == [100, 50]
    seen = _paths(nginx)
    assert sorted(seen) == sorted(f"/u/{i}" for i in range(150))  # no row twice, across the steps and workers
    # Step 1: 150 rows cut 75 | 75, each worker (1 client, 50 requests) took the first 50 of its part. Step 2: what
    # they left, [50, 75) and [125, 150), one part each; each worker's 2 clients ran out after 25 rows.
    assert _ids_of(seen[:100]) == set(range(50)) | set(range(75, 125))
    assert _ids_of(seen[100:]) == set(range(50, 75)) | set(range(125, 150))
    uses = [s["data"][0] for s in steps]
    assert [(u["available"], u["taken"], u["used"]) for u in uses] == [(150, 100, 100), (50, 50, 50)]
    assert [s["groups"]["main"]["ran_out"] for s in steps] == [None, "ids"]
    assert uses[0]["first_out"] is None
    workers = {w["worker"] for w in steps[1]["workers"]}
    assert len(workers) == 2 and uses[1]["first_out"] in workers
    assert f"{uses[1]['first_out']}'s part first" in r.stdout  # the step's line on the terminal says it
