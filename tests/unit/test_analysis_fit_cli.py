"""`knee fit` as a user runs it: a real subprocess, good and bad files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import knee_cli

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


def knee_fit(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return knee_cli("fit", *map(str, args), timeout=60)


def test_fit_prints_parameters_intervals_and_the_table() -> None:
    r = knee_fit(DATA / "specsdm91.csv")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "0.02773" in out and "0.0001044" in out  # σ, κ
    assert "[0.002402, 0.05305]" in out  # σ's 95 % interval
    assert "96.5" in out and "1884" in out  # N* and the predicted peak
    assert "0.9896" in out  # R²
    assert "measured vs fitted" in out and "1078" in out and "1646" in out


def test_fit_json() -> None:
    r = knee_fit(DATA / "specsdm91.csv", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["fit"]["sigma"] == pytest.approx(0.02773, rel=1e-3)
    assert doc["fit"]["kappa"] == pytest.approx(1.044e-4, rel=1e-3)
    assert doc["fit"]["lam"] == pytest.approx(90.0, rel=1e-3)
    assert len(doc["fit"]["ci"]["sigma"]) == 2
    assert [p["concurrency"] for p in doc["points"]] == [1, 18, 36, 72, 108, 144, 216]
    assert round(doc["points"][1]["fitted"]) == 1078


def test_fit_warns_and_advises(tmp_path: Path) -> None:
    f = tmp_path / "few.csv"
    f.write_text("1,1.0\n50,20\n100,15\n200,8\n")  # no header
    r = knee_fit(f)
    assert r.returncode == 0, r.stderr
    assert "warning:" in r.stdout
    assert "add levels between 1 and 50, e.g. 10 and 25" in r.stdout


def levels_csv(tmp_path: Path, rows: list[str]) -> Path:
    """A levels.csv of these rows (the header first)."""
    f = tmp_path / "levels.csv"
    f.write_text("\n".join(rows) + "\n")
    return f


def fitted_rates(f: Path, *args: str) -> list[float]:
    """The rates `knee fit F ARGS --json` fitted, in order."""
    r = knee_fit(f, *args, "--json")
    assert r.returncode == 0, r.stderr
    return [p["rate"] for p in json.loads(r.stdout)["points"]]


@pytest.mark.parametrize("sep", [";", "\t", "  "])
def test_fit_reads_other_separators(tmp_path: Path, sep: str) -> None:
    f = tmp_path / "points.txt"
    f.write_text("# load and rate\n" + "\n".join(f"{n}{sep}{x}" for n, x in [(1, 1.0), (2, 1.9), (4, 3.5), (8, 5.0)]))
    assert fitted_rates(f) == [1.0, 1.9, 3.5, 5.0]


def test_fit_reads_extra_columns_and_a_runs_levels_csv(tmp_path: Path) -> None:
    f = tmp_path / "levels.csv"
    rows = ["index,phase,direction,level,group,succeeded,superseded,rate_hz"]
    for i, (n, x) in enumerate([(1, 64.9), (18, 995.9), (36, 1652.4), (72, 1853.2), (108, 1828.9), (144, 1775.0)]):
        rows.append(f"{i},sweep,up,{n},main,0,false,{x}")
        rows.append(f"{i},sweep,up,{n},base,0,false,5")
    rows.append("9,sweep,down,72,main,0,false,100")  # the way down is not part of the curve
    rows.append("10,recovery,up,1,main,0,false,1")  # nor are recovery probes
    rows.append("11,sweep,up,36,main,0,true,400")  # nor a level measured again (the verdict leaves it out)
    f.write_text("\n".join(rows) + "\n")
    r = knee_fit(f, "--group", "main", "--json")
    assert r.returncode == 0, r.stderr
    assert [p["concurrency"] for p in json.loads(r.stdout)["points"]] == [1, 18, 36, 72, 108, 144]
    r = knee_fit(f)
    assert r.returncode != 0 and "holds groups 'base', 'main'; choose one with --group NAME" in r.stderr


def test_fit_of_a_mixs_levels_csv_fits_the_groups_rows_not_its_requests(tmp_path: Path) -> None:
    # a request mix writes a row per request beside the group's: all three were fitted (12 points of 4 levels)
    rows = ["index,phase,direction,level,group,request,superseded,rate_hz"]
    for i, (n, x) in enumerate([(10, 400.0), (20, 760.0), (40, 1300.0), (80, 1500.0)]):
        rows += [f"{i},sweep,up,{n},main,,false,{x}", f"{i},sweep,up,{n},main,read,false,{0.75 * x}"]
        rows.append(f"{i},sweep,up,{n},main,write,false,{0.25 * x}")
    assert fitted_rates(levels_csv(tmp_path, rows)) == [400.0, 760.0, 1300.0, 1500.0]


def test_fit_of_a_levels_csv_fits_the_steps_the_analysis_believes(tmp_path: Path) -> None:
    # a step run on a service that had not come back to rest (or with a worker lost) is not superseded, but the
    # verdict does not believe it: it was fitted (a stuck service's 40 Hz at 80 clients, "a collapse")
    rows = ["index,phase,direction,level,group,superseded,believed,rate_hz"]
    for i, (n, x) in enumerate([(10, 400.0), (20, 760.0), (40, 1300.0)]):
        rows.append(f"{i},sweep,up,{n},main,false,true,{x}")
    rows.append("3,sweep,up,80,main,false,false,40")
    assert fitted_rates(levels_csv(tmp_path, rows)) == [400.0, 760.0, 1300.0]
    rows = [rows[0], "0,sweep,up,10,main,false,false,400"]
    r = knee_fit(levels_csv(tmp_path, rows))
    assert r.returncode == 2 and "no row to fit" in r.stderr and "Traceback" not in r.stderr


def test_fit_of_a_rate_sweeps_levels_csv_fits_its_concurrency_not_the_offered_rate(tmp_path: Path) -> None:
    # a rate sweep's level is the offered rate; the USL's N is the concurrency in the service (Little's law), as the
    # verdict fits it; a closed-loop group of the same file has no concurrency: its level is its clients
    rows = ["index,phase,direction,level,group,believed,rate_hz,concurrency"]
    for i, (offered, x, n) in enumerate([(100, 100.0, 1.1), (200, 199.0, 2.3), (400, 390.0, 5.2), (800, 700, 14.8)]):
        rows += [f"{i},sweep,up,{offered},open,true,{x},{n}", f"{i},sweep,up,{i + 1},closed,true,{x},"]
    rows.append("4,sweep,up,1600,open,true,0,")  # nothing succeeded: no time in the service, no N (it was an error)
    f = levels_csv(tmp_path, rows)
    r = knee_fit(f, "--group", "open", "--json")
    assert r.returncode == 0, r.stderr
    assert [p["concurrency"] for p in json.loads(r.stdout)["points"]] == [1.1, 2.3, 5.2, 14.8]
    r = knee_fit(f, "--group", "closed", "--json")
    assert r.returncode == 0, r.stderr
    assert [p["concurrency"] for p in json.loads(r.stdout)["points"]] == [1, 2, 3, 4]


def test_fit_picks_a_stage_of_a_staged_run(tmp_path: Path) -> None:
    rows = ["label,phase,direction,level,group,rate_hz"]
    for n, x in [(1, 10.0), (2, 19.0), (4, 35.0), (8, 50.0)]:
        rows += [f"store,sweep,up,{n},main,{x}", f"fetch,sweep,up,{n},main,{3 * x}"]
    f = levels_csv(tmp_path, rows)
    assert fitted_rates(f, "--label", "fetch") == [30.0, 57.0, 105.0, 150.0]
    r = knee_fit(f)
    assert r.returncode != 0 and "choose one with --label NAME" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("", "has no data"),
        ("# only a comment\n\n", "has no data"),
        ("concurrency,rate\n1,1\n2,abc\n4,3\n", "line 3: 'abc' in column 'rate' is not a number"),
        ("1,1\n2\n4,3\n", "line 2: expected 2 columns"),
        ("1,1\n2,2\n", "at least 3 levels"),
        ("concurrency,rate\n", "no data rows"),
        ("clients,latency\n1,2\n2,3\n3,4\n", "no rate column"),
        ("1,1\n-2,2\n3,3\n", "line 2: concurrency must be above 0 and at most 1e+09 (got -2)"),
        ("1,100\n2,190\n4,350\n1e300,5\n", "line 4: concurrency must be above 0 and at most 1e+09 (got 1e300)"),
        ("1,100\n2,1e308\n4,350\n", "line 2: rate must be from 0 to 1e+15 (got 1e308)"),
        ("1,1\n2,nan\n3,3\n", "line 2: 'nan' in column 'rate' is not a finite number"),
        ("1,0\n2,0\n3,0\n", "every rate is 0"),
    ],
)
def test_bad_input_is_one_line_and_no_traceback(tmp_path: Path, content: str | None, message: str) -> None:
    f = tmp_path / "points.csv"
    if content is not None:
        f.write_text(content)
    r = knee_fit(f)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("knee: error: ")
    assert message in lines[0]


def test_a_directory_or_binary_file_is_a_user_error(tmp_path: Path) -> None:
    r = knee_fit(tmp_path)
    assert r.returncode != 0 and "is a directory" in r.stderr and "Traceback" not in r.stderr
    b = tmp_path / "x.csv"
    b.write_bytes(b"\xff\xfe\x00\x81garbage")
    r = knee_fit(b)
    assert r.returncode != 0 and "not a text" in r.stderr and "Traceback" not in r.stderr
