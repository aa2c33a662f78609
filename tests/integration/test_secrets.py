"""Secrets: a token given with --secret, or a credential given literally, is used but never written."""

from __future__ import annotations

import json
from pathlib import Path

from knee.store import RunDir

from conftest import knee_cli
from servers import Nginx

TOKEN = "s3cr3t-T0ken-value"
COOKIE = "abcdef-session-123456"
LITERAL = "Basic bGl0ZXJhbDpwYXNz"


def written(root: Path) -> str:
    """Every file under `root`, as text."""
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file())


def test_secrets_and_credentials_are_used_but_never_written(nginx: Nginx, tmp_path: Path) -> None:
    nginx.clear_log()
    out, js = tmp_path / "runs", tmp_path / "r.json"
    proc = knee_cli(
        "run", nginx.url + "/", "-c", "2", "-n", "20", "-q", "--out", str(out), "--json", str(js),
        "-H", "Authorization: Bearer ${tok}", "--secret", f"tok={TOKEN}",
        "-C", f"session={COOKIE}", "-H", f"Proxy-Authorization: {LITERAL}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Succeeded:                  20" in proc.stdout
    text = written(out) + js.read_text() + proc.stdout + proc.stderr
    for secret in (TOKEN, COOKIE, LITERAL):
        assert secret not in text
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    record = RunDir(run).load()
    headers = record.scenario.groups["main"].headers  # type: ignore[union-attr]
    assert headers == {"Authorization": "Bearer ${tok}", "Proxy-Authorization": "${main_header_proxy_authorization}"}
    assert record.scenario.groups["main"].cookies == {"session": "${main_cookie_session}"}  # type: ignore[union-attr]
    assert set(record.scenario.secrets) == {"tok", "main_header_proxy_authorization", "main_cookie_session"}
    spec = json.loads(js.read_text())["spec"]["groups"][0]["client"]["headers"]
    assert ["Authorization", "Bearer ${tok}"] in spec


def test_resume_asks_for_each_secret_by_name(nginx: Nginx, tmp_path: Path) -> None:
    proc = knee_cli(
        "sweep", nginx.url + "/", "--levels", "1,2", "-d", "0.3s", "--no-recovery", "--out", str(tmp_path),
        "-H", f"Authorization: {LITERAL}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert LITERAL not in written(run)
    # as if Ctrl-C had ended it after its first step
    rd = RunDir(run)
    record = rd.load()
    record.status, record.steps, record.verdicts = "interrupted", record.steps[:1], []
    rd.save(record)
    again = knee_cli("sweep", "--resume", str(run))
    assert again.returncode == 2
    assert again.stderr.strip() == (
        "knee: error: this run uses the secret 'main_header_authorization': "
        "pass --secret main_header_authorization=VALUE (or set main_header_authorization in the environment)"
    )
    nginx.clear_log()
    done = knee_cli("sweep", "--resume", str(run), "--secret", f"main_header_authorization={LITERAL}")
    assert done.returncode == 0, done.stderr
    assert [s.level for s in rd.load().steps] == [1, 2]
    assert LITERAL not in written(run)
