"""Values knee cannot honour are refused before any load, in one sentence that names the flag (or the scenario
key), the value and the fix, with exit status 2 (issue 34's smaller cases)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from knee import _engine
from knee.scenario.fields import MAX_RATE_HZ

from conftest import knee_cli


def refused(*args: str) -> str:
    """Run knee ARGS: it must exit 2 at once with one line on stderr and nothing else; that line."""
    started = time.monotonic()
    proc = knee_cli(*args, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert time.monotonic() - started < 10, "it ran load"
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("knee: error: ")
    return line.removeprefix("knee: error: ")


# Each rule's sentence, but for the flag (or key) and the value it names.
INTERVAL = "must be at least 1ms, the shortest interval the engine counts by (got {})"
STATUS = "must be HTTP statuses from 100 to 599, like 200, 200-299 or 2xx (got {})"
RATE = "must be at most 10,000,000/s, the most knee's engine can pace (an arrival every 100 ns): lower it (got {})"
WARMUP = "the part of each step measured after the warm-up: shorten --warmup or lengthen -d"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--interval", "0s", "-d", "1s", "--", "true"], "--interval " + INTERVAL.format("'0s'")),
        (
            ["run", "--connect-to", "127.0.0.1", "-n", "1", "tcp://127.0.0.1:1"],
            "--connect-to applies to http(s)://, ws(s):// and grpc(s):// targets only, not to tcp:// targets",
        ),
        (
            ["run", "--connect-to", "10.0.0.5:99999", "-n", "1", "http://svc.example/"],
            "--connect-to must have a port from 1 to 65535, not '99999', like host:port (got '10.0.0.5:99999')",
        ),
        (
            ["run", "--connect-to", "http://10.0.0.5/", "-n", "1", "http://svc.example/"],
            "--connect-to must be HOST or HOST:PORT, like 10.0.0.5 or 10.0.0.5:8443 (or [::1]:8443) (got "
            "'http://10.0.0.5/')",
        ),
        (
            ["sweep", "--levels", "1,2", "--interval", "0.0001", "-d", "1s", "--", "true"],
            "--interval " + INTERVAL.format("'0.0001'"),
        ),
        (
            ["run", "--expect-status", "999", "-n", "1", "http://127.0.0.1:1/"],
            "--expect-status " + STATUS.format("'999'"),
        ),
        (
            ["sweep", "--levels", "1", "--expect-status", "200,099", "http://127.0.0.1:1/"],
            "--expect-status " + STATUS.format("'200,099'"),
        ),
        (
            ["run", "-d", "1s", "--warmup", "5s", "--", "true"],
            f"--warmup 5s must be shorter than -d/--duration 1s, {WARMUP}",
        ),
        (
            ["sweep", "--levels", "1", "--warmup", "10s", "--", "true"],
            f"--warmup 10s must be shorter than -d/--duration 10s (the default), {WARMUP}",
        ),
        # A profile run to its end holds its warm-up (it was checked against the default 10 s, or not at all).
        (
            ["run", "--rate-profile", "0s:10, 5s:100", "--warmup", "6s", "-c", "2", "--", "true"],
            "--warmup 6s must be shorter than the profile '0s:10, 5s:100', which ends at 5s, warm-up included: "
            "shorten --warmup, or give -d",
        ),
        (["run", "--rate", "1e9", "-d", "1s", "--", "true"], "--rate " + RATE.format("1000000000.0")),
        (["sweep", "--rates", "100,2e7", "-d", "1s", "--", "true"], "--rates " + RATE.format("20000000.0")),
        # These reached the engine, which refused them in its own words (groups[0].stop.duration_ms, u64), or ran.
        (["run", "-d", "0s", "--", "true"], "-d/--duration must be a duration above 0, or \"auto\" (got '0s')"),
        (
            ["run", "-d", "99999999999999999999s", "--", "true"],
            "-d/--duration must be a duration of at most 24000h (1000 days) (got '99999999999999999999s')",
        ),
        (["run", "-n", "1", "--timeout", "0s", "--", "true"], "--timeout must be more than 0 (got '0s')"),
        (["run", "-n", "10" * 12, "--", "true"], f"-n must be at most 1000000000000000 (got {'10' * 12})"),
        (["run", "-n", "1", "--threads", "5000", "--", "true"], "--threads must be at most 1024 (got 5000)"),
        (
            ["run", "-n", "3", "--warmup", "20s", "--", "true"],
            "--warmup applies to a run for a duration (-d); with -n every operation is measured: drop --warmup, or "
            "give -d instead of -n",
        ),
        (
            ["run", "-n", "2", "-H", "Content-Length: 5", "http://127.0.0.1:1/"],
            "-H/--header: 'Content-Length' is knee's to send: it frames each request's body itself (Content-Length "
            "from the body); drop the header",
        ),
        (["run", "-n", "2", "--", "/tmp"], "'/tmp' is a directory, not a program: give the program to run there"),
        (
            ["run", "-n", "2", "--cwd", "/nonexistent", "--", "true"],
            "cwd '/nonexistent' is not a directory (--cwd): the command would run nowhere; give one that exists",
        ),
        # A table's own checks said its keys (min_duration, interval) where the command line has options
        (
            ["sweep", "--levels", "1,2", "-d", "auto", "--min-duration", "1s", "--", "true"],
            "--min-duration (1 s) must hold at least 5 intervals (5 s) to judge whether the rate has settled; raise "
            "--min-duration or lower --interval",
        ),
        (
            ["sweep", "--levels", "1,2", "-d", "auto", "--min-duration", "10s", "--max-duration", "5s", "--", "true"],
            "--max-duration (5 s) must not be below --min-duration (10 s)",
        ),
        # Options that bound another one given alone (the sentences named [search] and sweep keys)
        (
            ["sweep", "--levels", "1", "--max-level", "1", "--", "true"],
            "--max-level bounds a level search: give --levels auto (or --rates auto), or drop --max-level",
        ),
        (
            ["sweep", "--levels", "auto", "--start", "5", "--max-level", "2", "--", "true"],
            "--max-level 2 must not be below --start 5",
        ),
        (
            ["sweep", "--levels", "1", "--min-duration", "1s", "-d", "1s", "--", "true"],
            "--min-duration bounds -d auto (each level until its rate settles): give -d auto or drop it",
        ),
        (
            ["run", "-n", "1", "--monitor-metric", "x", "--", "true"],
            "--monitor-metric names metrics of the --monitor-url endpoints: give --monitor-url URL too",
        ),
        (
            ["sweep", "--levels", "1e3", "--", "true"],
            "--levels '1e3': '1e3' is not a whole number; use a whole number of clients, e.g. 5,20,50",
        ),
        # What only the engine reads, named by the option (it said groups[0].client.method as the first step began)
        (
            ["run", "-n", "1", "-m", "GE T", "http://127.0.0.1:1/"],
            '-m/--method: "GE T" is not an HTTP method; use e.g. GET or POST',
        ),
        (
            ["run", "-n", "1", "-H", "X-é: v", "http://127.0.0.1:1/"],
            '-H/--header: name "X-é" is not a valid header name',
        ),
        (
            ["sweep", "--levels", "1", "--expect-body-regex", "(", "http://127.0.0.1:1/"],
            '--expect-body-regex: "(" is not a valid regular expression (error: unclosed group); fix the pattern',
        ),
        (
            ["soak", "-c", "1", "-d", "auto", "--", "true"],
            "-d auto runs a sweep's level until its rate settles; a soak holds the load for a set time: give -d 2h",
        ),
    ],
)
def test_a_value_knee_cannot_honour_is_one_sentence_naming_its_flag(args: list[str], said: str) -> None:
    assert refused(*args) == said


EXEC = '[groups.main]\nkind = "exec"\nargv = ["true"]\n'
RATED = '[groups.main]\nkind = "exec"\nargv = ["true"]\nrate = "level"\n'
HTTP = '[groups.main]\nkind = "http"\nurl = "http://127.0.0.1:1/"\nexpect_status = 600\n'


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            EXEC + '[sweep]\nlevels = [1]\nduration = "1s"\nwarmup = "1s"\n',
            "s.toml line 4: sweep: warmup (1 s) must be shorter than duration (1 s), the part of each step that is "
            "measured after it; shorten warmup or lengthen duration",
        ),
        (
            EXEC + 'rate = "0s:10, 5s:100"\nclients = 2\n[sweep]\nwarmup = "6s"\n',
            "s.toml line 7: sweep.warmup (6 s) must be shorter than the profile of group 'main', which ends at 5 s, "
            "warm-up included: shorten warmup, or give sweep.duration",
        ),
        (
            EXEC + '[sweep]\nlevels = [1]\nduration = "1s"\ninterval = "0s"\n',
            "s.toml line 7: sweep.interval " + INTERVAL.format("'0s'"),
        ),
        (
            RATED + '[sweep]\nduration = "1s"\nrates = [5e7]\n',
            "s.toml line 7: sweep.rates[0] " + RATE.format("50000000.0"),
        ),
        (
            HTTP + '[sweep]\nlevels = [1]\nduration = "1s"\n',
            "s.toml line 4: groups.main.expect_status " + STATUS.format("600"),
        ),
        # true was a duration of 1 s; infinity passed as far as run.json, which it left damaged ("running").
        (
            EXEC + 'think = true\n[sweep]\nlevels = [1]\nduration = "1s"\n',
            's.toml line 4: groups.main.think must be a duration like 2s, "uniform(1s, 3s)" or "exponential(2s)" '
            "(got True)",
        ),
        (
            EXEC + "[sweep]\nlevels = [1]\nduration = 1979-05-27\n",
            's.toml line 6: sweep.duration must be a duration like 10s, 2m or 500ms, or "auto" '
            "(got datetime.date(1979, 5, 27))",
        ),
        # a negative duration was "must be a duration like 10s" where a number said "must not be negative"
        (
            EXEC + 'timeout = "-1s"\n[sweep]\nlevels = [1]\nduration = "1s"\n',
            "s.toml line 4: groups.main.timeout must not be negative: a duration is 0 or more, like 10s, 2m or 500ms "
            "(got '-1s')",
        ),
        (
            EXEC + '[sweep]\nlevels = [1]\nduration = "-2s"\n',
            "s.toml line 6: sweep.duration must not be negative: a duration is 0 or more, like 10s, 2m or 500ms "
            "(got '-2s')",
        ),
        (
            EXEC + "[sweep]\nlevels = [1]\nduration = inf\n",
            "s.toml line 6: sweep.duration must be a duration of at most 24000h (1000 days) (got inf)",
        ),
        (
            EXEC + 'timeout = 1e300\n[sweep]\nlevels = [1]\nduration = "1s"\n',
            "s.toml line 4: groups.main.timeout must be a duration of at most 24000h (1000 days) (got 1e+300)",
        ),
        (
            EXEC + '[sweep]\nlevels = [1]\ntotal = 5\nwarmup = "1s"\n',
            "s.toml line 4: sweep: warmup applies to steps run for a duration; with total every operation is measured "
            "(the warm-up was ignored): drop warmup, or give duration instead of total",
        ),
    ],
)
def test_a_scenario_file_names_the_keys(toml: str, said: str, tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(toml)
    assert refused("sweep", str(tmp_path / "s.toml")).replace(str(tmp_path) + "/", "") == said


def test_what_the_engine_refuses_is_said_by_key_before_a_run_directory(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(
        HTTP.replace("expect_status = 600", 'method = "GE T"') + '[sweep]\nlevels = [1]\nduration = "1s"\n'
    )
    said = refused("sweep", str(tmp_path / "s.toml"), "--out", str(tmp_path / "runs"))
    assert said.replace(str(tmp_path) + "/", "") == (
        's.toml line 4: groups.main.method: "GE T" is not an HTTP method; use e.g. GET or POST'
    )
    assert not (tmp_path / "runs").exists()  # nothing ran, so nothing is kept


def test_the_engine_paces_up_to_the_bound_the_scenario_allows() -> None:
    def spec(rate: float) -> str:
        client = {"kind": "tcp", "addr": "127.0.0.1:1"}
        group = {"name": "g", "clients": 1, "stop": {"duration_ms": 1000}, "client": client}
        return json.dumps({"groups": [group | {"pacer": {"kind": "rate", "rate_hz": rate}}]})

    _engine.check_spec(spec(MAX_RATE_HZ))
    with pytest.raises(_engine.SpecError, match=r"rate_hz 10000001 is more than the engine can pace"):
        _engine.check_spec(spec(MAX_RATE_HZ + 1))


def test_a_refused_run_option_leaves_no_run_directory(tmp_path: Path) -> None:
    """--ship without a cluster, --operations-log where it cannot be written: refused before the run directory is
    made (a run.json saying "running" for ever was left behind)."""
    out = tmp_path / "runs"
    said = refused("sweep", "--levels", "1,2", "--ship", "--out", str(out), "--", "true")
    assert "--ship" in said
    said = refused("run", "-n", "1", "--operations-log", "/nonexistent/x.log", "--out", str(out), "--", "true")
    assert said.startswith("--operations-log '/nonexistent/x.log': its directory does not exist")
    assert not out.exists()
