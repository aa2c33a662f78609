#!/usr/bin/env python3
"""`make bench`, the level search: how long `--levels auto` takes to locate the peak, the error onset and the
collapse to 10 %, against a fixed sweep whose levels are spaced 10 % apart over the same range (docs/analysis.md,
"The level search"; issue: at most 25 % of the fixed sweep's time, with the same verdict), and what waiting for
rest before each level (`settle_wait`, docs/analysis.md "Settling between steps") adds to the search's wall clock
on this service, which has nothing to drain (issue: at most 10 %): the search is run again with `settle_wait = 0`.

The service is `knee target` with a known curve: the USL with λ = 100/s, σ = 0.05, κ = 0.0005 (N* = √((1 − σ)/κ)
≈ 43.6) and a pool that answers 503 past 300 requests in flight (errors from 301 clients, where the refused
clients spin and the failure ratio passes 50 %: the collapse). Both sweeps run the same seconds per level and the
same pause, over the whole range (no stop at the collapse, so the fixed sweep reaches the onset too); the
section between the markers in docs/performance.md is rewritten with the numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from paired import write_section  # noqa: E402

from knee.demo_target import start_target  # noqa: E402
from knee.model import RunRecord  # noqa: E402
from knee.store import RunDir  # noqa: E402

LAM, SIGMA, KAPPA, POOL, TOP = 100.0, 0.05, 0.0005, 300, 1024
BEGIN, END = "<!-- search-bench: begin -->", "<!-- search-bench: end -->"


def fixed_levels(top: int, spacing: float = 0.10) -> list[int]:
    """1 … top, each level at least `spacing` above the last (and one client more): a fixed sweep as precise as
    the search."""
    levels, n = [1], 1
    while n < top:
        n = min(top, max(n + 1, round(n * (1 + spacing))))
        levels.append(n)
    return levels


SCENARIO = """\
name = "{name}"

[groups.main]
kind = "http"
url = "{url}"
clients = "level"
timeout = "5s"

[sweep]
levels = {levels}
duration = "{seconds}s"
settle_wait = "{settle}"

[stop]
at_collapse = false  # both sweeps cover the whole range: the fixed one must reach the onset too

[recovery]
enabled = false
{search}"""


def sweep(
    url: str, out: Path, seconds: float, levels: str, search: str = "", *, settle: str = "30s"
) -> tuple[RunRecord, float]:
    out.mkdir(parents=True)
    scenario = out / "scenario.toml"
    text = SCENARIO.format(name=out.name, url=url, levels=levels, seconds=seconds, search=search, settle=settle)
    scenario.write_text(text)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "knee", "sweep", str(scenario), "--out", str(out)],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 3):
        raise SystemExit(f"knee sweep failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return RunDir(run).load(), wall


def why(reason: str) -> str:
    """A step's reason in a word or two: start, ramp, N*, or the point it narrowed (guided: where a limit's
    successes in service placed it)."""
    for word in ("N*", "saturation", "error onset", "capacity under the SLO", "plateau", "peak", "collapse"):
        if word in reason:
            return f"{word}, guided" if reason.startswith("narrowing the") and word != "peak" else word
    return "start" if reason.startswith("the search starts") else reason.split(" ", maxsplit=1)[0].rstrip(":")


def located(record: RunRecord) -> dict[str, object]:
    v = record.verdicts[0]
    return {
        "peak": v.peak_level,
        "n_star": round(v.usl.n_star, 1) if v.usl is not None and v.usl.n_star else None,
        "onset": v.error_onset_level,
        "collapse": v.collapse_level,
        "levels": len([s for s in record.steps if s.phase == "sweep"]),
        "measured_s": round(sum(s.elapsed_s for s in record.steps), 1),
        "order": [[s.level, why(s.reason)] for s in record.steps if s.phase == "sweep"],
        "settle_s": round(sum(s.settle.seconds for s in record.steps if s.settle is not None), 1),
        "probes": sum(s.settle.probes for s in record.steps if s.settle is not None),
    }


def within(a: object, b: object, share: float = 0.10) -> bool:
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= share * max(float(a), float(b))


def section(
    seconds: float, auto: dict[str, Any], fixed: dict[str, Any], walls: tuple[float, ...], rest: dict[str, Any] | None
) -> str:
    share = walls[0] / walls[1]
    same = all(within(auto[k], fixed[k]) for k in ("onset", "collapse")) and within(auto["n_star"], fixed["n_star"])
    n_star = (1 - SIGMA) / KAPPA
    rows = [
        "| sweep | levels | wall clock | peak level | USL N* | error onset | collapse |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r, wall in (("`--levels auto --max-level 1024`", auto, walls[0]), ("fixed, 10 % apart", fixed, walls[1])):
        rows.append(
            f"| {name} | {r['levels']} | {wall:.0f} s | {r['peak']} | {r['n_star']} | {r['onset']} | {r['collapse']} |"
        )
    return "\n".join(
        [
            BEGIN,
            "## The level search against a fixed sweep of the same precision",
            "",
            f"`python bench/search_bench.py` (part of `make bench`): `knee target --lambda {LAM:g} --sigma {SIGMA:g} "
            f"--kappa {KAPPA:g} --pool {POOL}` (N* = {n_star**0.5:.1f}, errors from {POOL + 1} clients), "
            f"{seconds:g} s per level, 1 … {TOP} clients. The fixed sweep's levels are 10 % apart "
            f"({fixed['levels']} levels); the search locates each point to 10 %.",
            "",
            *rows,
            "",
            f"The search took **{share:.0%}** of the fixed sweep's time (target: at most 25 %); the same verdict "
            f"(onset, collapse and N* within 10 % of each other): **{'yes' if same else 'no'}**.",
            "",
            *settle_lines(auto, walls, rest),
            *order_lines(auto),
            "The search ramps ×2 from 1 client (×4 while the rate grows in proportion to the level), narrows the "
            "error onset where the successes in service at the first failing level place the limit (Little's law), "
            "measures the peak once at the USL fit's N*, and bisects what is left at geometric middles "
            '(docs/analysis.md, "The level search"). The fixed sweep needs about 24 levels per tenfold range '
            "at 10 % spacing (60 for 1 … 1024); the search, a level per doubling of its ramp and a few per point.",
            END,
        ]
    )


def settle_lines(auto: dict[str, Any], walls: tuple[float, ...], rest: dict[str, Any] | None) -> list[str]:
    """What waiting for rest before each level cost the search: its wall clock against the same search with
    settle_wait = 0 (a third run), and how long the waits were."""
    if len(walls) < 3 or rest is None:
        return []
    extra = walls[0] / walls[2] - 1
    return [
        f'Waiting for rest before each level (the default `settle_wait`, docs/analysis.md "Settling between '
        f'steps"): the search took {walls[0]:.0f} s with it and {walls[2]:.0f} s with `settle_wait = 0` '
        f"({rest['levels']} levels): **{extra:+.1%}** (target: at most +10 %); its waits came to "
        f"{auto.get('settle_s', 0):.1f} s in all, {auto.get('probes', 0)} single operations probing the service.",
        "",
    ]


def order_lines(auto: dict[str, Any]) -> list[str]:
    """The search's levels in the order it measured them, each with the start of its reason."""
    steps = auto.get("order") or []
    if not steps:
        return []
    return ["The search's levels, in order: " + ", ".join(f"{lv:g} ({why})" for lv, why in steps) + ".", ""]


def section_from(data: dict[str, Any]) -> str:
    """The section from bench/results/bench-search.json (bench/report.py renders the page with it)."""
    return section(
        float(data.get("seconds", 2.0)), data["auto"], data["fixed"], tuple(data["walls"]), data.get("unsettled")
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=2.0, help="seconds per level (default 2)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    p.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "bench-search.json")
    args = p.parse_args()
    import tempfile

    with (
        tempfile.TemporaryDirectory(prefix="knee-search-bench-") as tmp,
        start_target(lam=LAM, sigma=SIGMA, kappa=KAPPA, pool=POOL, reject_ms=0.0) as target,
    ):
        url = f"{target.url}/"
        search = f"\n[search]\nmax = {TOP}\n"
        auto_rec, auto_wall = sweep(url, Path(tmp) / "auto", args.seconds, '"auto"', search)
        fixed_rec, fixed_wall = sweep(url, Path(tmp) / "fixed", args.seconds, str(fixed_levels(TOP)))
        rest_rec, rest_wall = sweep(url, Path(tmp) / "unsettled", args.seconds, '"auto"', search, settle="0s")
    auto, fixed, rest = located(auto_rec), located(fixed_rec), located(rest_rec)
    walls = (auto_wall, fixed_wall, rest_wall)
    print(json.dumps({"auto": auto, "fixed": fixed, "unsettled": rest, "walls_s": walls}, indent=1))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    data = {"seconds": args.seconds, "auto": auto, "fixed": fixed, "unsettled": rest, "walls": list(walls)}
    args.json.write_text(json.dumps(data, indent=1))
    write_section(args.out, section(args.seconds, auto, fixed, walls, rest))


if __name__ == "__main__":
    main()
