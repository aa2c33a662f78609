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


def files(root: Path) -> dict[str, str]:
    """Every file under `root` (the engine's results and histograms too), as text, by path."""
    return {str(p.relative_to(root)): p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file()}


def written(root: Path) -> str:
    """Every file under `root`, as text."""
    return "\n".join(files(root).values())


def test_a_secret_the_service_echoes_back_is_not_written(nginx: Nginx, tmp_path: Path) -> None:
    """nginx answers 401 with the Authorization and Cookie it got in its body: the failure's sample (in run.json,
    the reports, the engine's step file, --json and on the terminal) holds the placeholder's mark, not the value."""
    nginx.clear_log()
    out, js = tmp_path / "runs", tmp_path / "r.json"
    proc = knee_cli(
        "run", nginx.url + "/echo-credentials", "-c", "2", "-n", "10", "-q", "--out", str(out), "--json", str(js),
        "-H", "Authorization: Bearer ${tok}", "--secret", f"tok={TOKEN}", "-C", f"session={COOKIE}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert nginx.credential_lines() == [("/echo-credentials", f"Bearer {TOKEN}", "-", f"session={COOKIE}")] * 10
    doc = json.loads(js.read_text())
    assert doc["failures"] == {"status": 10}
    (reason,) = doc["reasons"]
    assert "denied: Bearer <redacted> session=<redacted>" in reason["sample"], reason
    assert "10 × [status]" in proc.stdout and "denied: Bearer <redacted>" in proc.stdout, proc.stdout
    written_files = files(out)
    assert any(name.endswith(".knee") for name in written_files)
    for secret in (TOKEN, COOKIE):
        for name, text in [*written_files.items(), ("--json", js.read_text()), ("stdout", proc.stdout)]:
            assert secret not in text, name


def test_a_cookie_whose_value_is_a_word_of_knees_own_json_leaves_it_json(nginx: Nginx, tmp_path: Path) -> None:
    """Every cookie is a secret: `consent=true` and `tab=main` made every `true` of run.json `<redacted>` (not JSON:
    the sweep stopped before its first step) and the group `main` `<redacted>`. Values a scenario's own words or
    JSON's literals are not scrubbed; the run is whole."""
    out = tmp_path / "runs"
    proc = knee_cli(
        "sweep", nginx.url + "/", "--levels", "1,2", "-d", "1s", "--no-recovery", "--settle", "0s", "--out", str(out),
        "-C", "consent=true", "-C", "tab=main", "-C", f"session={COOKIE}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (run,) = out.iterdir()
    record = RunDir(run).load()
    assert [s.level for s in record.steps] == [1, 2] and record.measured_group == "main"
    assert all(s.groups["main"].succeeded > 0 for s in record.steps)
    assert COOKIE not in written(out)


def test_a_credential_in_a_command_s_environment_is_sent_not_written(tmp_path: Path) -> None:
    """`-e API_TOKEN=…` (named like a credential: a secret of its own) reaches the command, which writes what it got
    to a file outside the run and says it on stderr when it fails: the run's files and output do not hold it."""
    received, out, js = tmp_path / "received", tmp_path / "runs", tmp_path / "r.json"
    script = f'echo "$API_TOKEN" >> {received}; [ "${{client}}" = 0 ] || {{ echo "refused $API_TOKEN" >&2; exit 1; }}'
    proc = knee_cli(
        "run", "-c", "2", "--iterations", "3", "-q", "--out", str(out), "--json", str(js),
        "-e", f"API_TOKEN={TOKEN}", "--", "sh", "-c", script,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert received.read_text().splitlines() == [TOKEN] * 6  # every operation got the value
    doc = json.loads(js.read_text())
    assert (doc["succeeded"], doc["failed"]) == (3, 3)
    assert doc["reasons"][0]["sample"].endswith("refused <redacted>"), doc["reasons"]
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    assert RunDir(run).load().scenario.groups["main"].env == {"API_TOKEN": "${main_env_api_token}"}  # type: ignore[union-attr]
    for name, text in [*files(out).items(), ("--json", js.read_text()), ("stdout", proc.stdout)]:
        assert TOKEN not in text, name
    assert TOKEN not in proc.stderr


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
    # sent: nginx logged every request with each credential's value, not a placeholder
    assert nginx.credential_lines() == [("/", f"Bearer {TOKEN}", LITERAL, f"session={COOKIE}")] * 20
    # not written: no file of the run directory, nor --json, nor what knee printed
    for secret in (TOKEN, COOKIE, LITERAL):
        for name, text in [*files(out).items(), ("--json", js.read_text()), ("stdout", proc.stdout)]:
            assert secret not in text, name
        assert secret not in proc.stderr
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
