"""`knee run SCENARIO.toml -c N -n M`: a scenario file's groups at one level (knee.scenario.onelevel), as
`knee run URL` builds the same options; what a file says itself is refused on the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from knee.cli import main
from knee.errors import UserError
from knee.scenario import from_raw
from knee.scenario.messages import Source
from knee.scenario.onelevel import at_one_level
from knee.scenario.oneline import Options

FILE: dict[str, Any] = {
    "name": "shop",
    "vars": {"target": "http://127.0.0.1:8080"},
    "groups": {
        "main": {"kind": "http", "clients": "level", "url": "${target}/", "timeout": "5s"},
        "base": {"kind": "http", "clients": 2, "background": True, "url": "${target}/health"},
    },
    "sweep": {"levels": [5, 20, 50], "duration": "30s", "warmup": "1s", "direction": "up-down"},
    "stop": {"max_level": 40},
    "recovery": {"enabled": True},
    "search": {},
    "slo": {"p99_ms": 100},
}


def one_level(o: Options, raw: dict[str, Any] | None = None) -> dict[str, Any]:
    given = [k for k, v in vars(o).items() if v not in (None, False, [], "")]
    table = at_one_level(raw or FILE, o, given, "shop.toml")
    from_raw(table, Source("shop.toml"))  # it loads
    return table


def test_the_level_and_stop_of_the_command_line() -> None:
    table = one_level(Options(clients=8, n=400))
    assert table["sweep"] == {"levels": [8], "total": 400}  # the file's warm-up is of a run for a duration
    assert table["groups"]["main"]["clients"] == "level" and table["groups"]["main"]["timeout"] == "5s"
    assert table["groups"]["base"] == FILE["groups"]["base"]
    assert table["stop"] == {"at_collapse": False} and table["recovery"] == {"enabled": False}
    assert "search" not in table and table["slo"] == {"p99_ms": 100}
    assert table["vars"] == FILE["vars"] and table["name"] == "shop"


def test_without_a_stop_the_files_own() -> None:
    assert one_level(Options(clients=3))["sweep"] == {"duration": "30s", "warmup": "1s", "levels": [3]}
    bare = {**FILE, "sweep": {}}
    assert one_level(Options())["sweep"]["levels"] == [1]
    assert one_level(Options(), bare)["sweep"] == {"levels": [1], "duration": "10s"}


def test_a_rate() -> None:
    table = one_level(Options(rates=[200.0], clients=10, duration="2s", slo_p99=50))
    assert table["groups"]["main"]["clients"] == 10 and table["groups"]["main"]["rate"] == "level"
    assert table["sweep"] == {"warmup": "1s", "rates": [200.0], "duration": "2s"}
    assert table["slo"] == {"p99_ms": 50}
    rate_file = {**FILE, "groups": {"main": {"kind": "http", "clients": 30, "rate": "level", "url": "http://h/"}}}
    rate_file["sweep"] = {"rates": [10, 20], "duration": "1s"}
    assert one_level(Options(rates=[5.0]), rate_file)["groups"]["main"]["clients"] == 30  # the file's connections
    closed = one_level(Options(clients=4), rate_file)["groups"]["main"]
    assert closed["clients"] == "level" and "rate" not in closed


def test_a_rate_profile_keeps_its_end_and_its_arrivals() -> None:
    """A group with a rate profile runs as the file says: to the profile's end (not the one-line default of 10 s),
    with the file's arrival and max_in_flight (examples/ramp.toml under knee run)."""
    raw = {
        "groups": {"main": {"kind": "http", "url": "http://127.0.0.1:8080/", "clients": 50, "rate": "0s:10, 60s:400"}},
        "sweep": {"arrival": "poisson", "max_in_flight": 300},
    }
    table = one_level(Options(), raw)
    assert table["groups"]["main"]["rate"] == "0s:10, 60s:400" and "duration" not in table["sweep"]
    assert table["sweep"]["arrival"] == "poisson" and table["sweep"]["max_in_flight"] == 300
    assert one_level(Options(duration="5s"), raw)["sweep"]["duration"] == "5s"
    raw["groups"]["main"]["rate"] = "sine(mean=5, amplitude=1, period=2s)"  # no end of its own: the default
    assert one_level(Options(), raw)["sweep"]["duration"] == "10s"


def test_what_the_file_says_is_refused() -> None:
    with pytest.raises(UserError, match=r"^-H/--header is an option of a one-line run .* shop.toml says it itself"):
        one_level(Options(clients=2, headers=["X: 1"]))
    with pytest.raises(UserError, match=r"^--timeout is an option of a one-line run"):
        one_level(Options(timeout="1s"))
    fixed = {
        **FILE,
        "groups": {"main": {"kind": "http", "clients": 3, "url": "http://h/"}},
        "sweep": {"duration": "1s"},
    }
    with pytest.raises(UserError, match=r'^shop.toml: no group follows the level \(clients = "level"\), so -c'):
        one_level(Options(clients=2), fixed)
    assert one_level(Options(n=10), fixed)["sweep"] == {"total": 10}
    staged = {**FILE, "sweep": {**FILE["sweep"], "stages": ["a", "b"]}}
    with pytest.raises(UserError, match=r"sweep.stages makes a step per stage, and knee run runs one"):
        one_level(Options(clients=2), staged)


def test_command_line_mistakes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[groups.main\n")
    for argv, said in (
        (["run", str(tmp_path / "none.toml"), "-c", "2"], "cannot read scenario"),
        (["run", str(bad), "-c", "2"], "bad.toml line 1: not valid TOML"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and said in err and len(err.splitlines()) == 1, err


def test_a_file_s_slo_judges_its_own_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A group named as the file names it, not "main": its SLO missed is exit 3 (it was skipped: exit 0), and
    --json writes the group's document (a KeyError traceback)."""
    api = tmp_path / "api.toml"
    api.write_text('[groups.api]\nkind = "exec"\nargv = ["false"]\n[slo]\nfailure_ratio = 0.01\n')
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(api), "-c", "1", "-n", "3", "--json", str(tmp_path / "r.json"), "--quiet"])
    out = capsys.readouterr().out
    assert exit_.value.code == 3 and "missed" in out, out
    assert '"failed": 3' in (tmp_path / "r.json").read_text()
