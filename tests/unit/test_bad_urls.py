"""A malformed URL is one sentence and exit 2 at every door: `knee run`, a one-line `knee sweep`, a scenario file's
`url` and `addr`, and the Python API (a knee error, never urllib's ValueError "Invalid IPv6 URL"). Each fails before
anything is sent, so no server is needed; the command line runs in-process (`knee.cli.main`, as a user's process
does), and the case of the issue also as its own process."""

from __future__ import annotations

from pathlib import Path

import pytest

import knee
from knee.cli import main
from knee.errors import UserError

from conftest import knee_cli

# kind of mistake -> (an http target, a tcp target)
MALFORMED = {
    "IPv6 bracket not closed": ("http://[::1:18089/", "tcp://[::1"),
    "not an IPv6 address in brackets": ("http://[zz]:8080/", "tcp://[zz]:9000"),
    "IPv6 address without brackets": ("http://::1:8080/", "tcp://::1:9000"),
    "no host": ("http://:8080/", "tcp://:9000"),
    "no host at all": ("http:///path", "tcp://"),
    "port not a number": ("http://127.0.0.1:eighty/", "tcp://127.0.0.1:ninety"),
    "port out of range": ("http://127.0.0.1:99999/", "tcp://127.0.0.1:65536"),
    "port zero": ("http://127.0.0.1:0/", "tcp://127.0.0.1:0"),
    "no port (tcp)": ("http://127.0.0.1:8080:80/", "tcp://127.0.0.1"),
    "unknown scheme": ("ftp://127.0.0.1/", "udp://127.0.0.1:9000"),
    "empty": ("", ""),
}
CASES = [pytest.param(url, id=f"{kind}-{url}") for kind, pair in MALFORMED.items() for url in pair]


def one_sentence(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the command line in-process: it must exit 2 with one line on stderr (a traceback would raise here)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("knee: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("url", CASES)
def test_knee_run_and_a_one_line_sweep(url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    line = one_sentence(["run", url, "-c", "2", "-n", "10"], capsys)
    assert "TARGET" in line or "target" in line, line
    assert url == "" or repr(url) in line, line
    line = one_sentence(["sweep", url, "--levels", "1,2", "-d", "1s", "--out", str(tmp_path)], capsys)
    assert url == "" or repr(url) in line, line
    assert not list(tmp_path.iterdir()), "nothing runs, no run directory"


def _scenario(tmp_path: Path, group: str) -> str:
    path = tmp_path / "bad.toml"
    path.write_text(f'[sweep]\nlevels = [1]\nduration = "1s"\n\n[groups.main]\n{group}\n')
    return str(path)


@pytest.mark.parametrize("url", CASES)
def test_a_scenario_file(url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    if url.startswith("tcp://"):
        addr = url.removeprefix("tcp://")
        file, key, value = _scenario(tmp_path, f'kind = "tcp"\naddr = "{addr}"'), "groups.main.addr", addr
    else:
        file, key, value = _scenario(tmp_path, f'kind = "http"\nurl = "{url}"'), "groups.main.url", url
    line = one_sentence(["sweep", file, "--out", str(tmp_path / "runs")], capsys)
    assert "bad.toml line 7" in line and key in line and repr(value) in line, line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("url", [u for u in CASES if u.values[0]])
def test_the_python_api_raises_a_knee_error(url: str, tmp_path: Path) -> None:
    for call in (
        lambda: knee.run(url, clients=2, n=10),
        lambda: knee.sweep(url, levels=[1, 2], duration="1s", out=tmp_path),
    ):
        with pytest.raises(UserError) as err:
            call()
        assert not isinstance(err.value, ValueError)
        assert "\n" not in str(err.value) and repr(url) in str(err.value), err.value


def test_the_issue_s_case_as_its_own_process() -> None:
    proc = knee_cli("run", "http://[::1:18089/", "-c", "2", "-n", "10", timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr == (
        "knee: error: TARGET must close the IPv6 address's '[' with ']', like http://[::1]:8080 "
        "(got 'http://[::1:18089/')\n"
    )
