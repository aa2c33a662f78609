"""vegeta's targets files (knee.importers.targets): the http and json formats as vegeta's lib/targets.go reads them,
`knee import targets`, and `--targets` merged with a one-line run's options. What nginx sees of knee and of
`vegeta attack` on the same file is held together in tests/integration/test_import.py."""

from __future__ import annotations

import base64
import json
import tomllib
from pathlib import Path

import pytest

from cli import one_sentence
from knee.cli import main
from knee.errors import UserError
from knee.importers.targets import import_targets, parse_http, parse_json, with_targets
from knee.scenario import Source, from_raw
from knee.scenario.oneline import Options, scenario_table

HTTP_TARGETS = """\
# a comment
GET http://127.0.0.1:8080/a?x=1
X-Trace: one
X-Trace: two
Authorization: Bearer tok-abc

POST http://127.0.0.1:8080/b
Content-Type: application/json
@body.json
GET http://127.0.0.1:8080/c
PUT http://127.0.0.1:8080/d
# a comment inside a target
Accept: text/plain
"""


def test_http_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "body.json").write_text('{"n": 1}')
    path = tmp_path / "targets.txt"
    path.write_text(HTTP_TARGETS)
    monkeypatch.chdir(tmp_path)
    targets = parse_http(path)
    assert [(t.method, t.url) for t in targets] == [
        ("GET", "http://127.0.0.1:8080/a?x=1"),
        ("POST", "http://127.0.0.1:8080/b"),
        ("GET", "http://127.0.0.1:8080/c"),
        ("PUT", "http://127.0.0.1:8080/d"),
    ]
    assert targets[0].headers == [("X-Trace", "one"), ("X-Trace", "two"), ("Authorization", "Bearer tok-abc")]
    assert targets[1].body == b'{"n": 1}' and targets[1].body_path == "body.json"
    assert targets[3].headers == [("Accept", "text/plain")]


def test_a_body_file_beside_the_targets_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "b.bin").write_bytes(b"\x00\x01")
    path = tmp_path / "t" / "targets.txt"
    path.write_text("POST http://127.0.0.1:8080/up\n@b.bin\n")
    monkeypatch.chdir(tmp_path)
    (target,) = parse_http(path)
    assert target.body == b"\x00\x01" and target.body_path == str(tmp_path / "t" / "b.bin")


def test_json_format(tmp_path: Path) -> None:
    path = tmp_path / "targets.jsonl"
    lines = [
        {"method": "GET", "url": "http://127.0.0.1:8080/a", "header": {"X-A": ["1", "2"], "Accept": ["*/*"]}},
        {},
        {"method": "POST", "url": "http://127.0.0.1:8080/b", "body": base64.b64encode(b"k=v").decode()},
    ]
    path.write_text("\n".join(json.dumps(x) if x else "" for x in lines) + "\n")
    a, b = parse_json(path)
    assert a.headers == [("X-A", "1"), ("X-A", "2"), ("Accept", "*/*")] and a.body is None
    assert (b.method, b.body) == ("POST", b"k=v")


def test_import_writes_each_target_once_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "body.json").write_text('{"n": 1}')
    path = tmp_path / "targets.txt"
    path.write_text(HTTP_TARGETS + "\nGET http://127.0.0.1:8080/c\n")
    monkeypatch.chdir(tmp_path)
    result = import_targets(path, "http", bodies_dir="bodies")
    table = tomllib.loads(result.toml())
    reqs = table["groups"]["main"]["requests"]
    assert table["groups"]["main"]["mix_order"] == "in_turn"  # in the file's order, as vegeta sends them
    assert [(r["name"], r["weight"], r["url"]) for r in reqs] == [
        ("get_a", 1, "${target}/a?x=1"),
        ("post_b", 1, "${target}/b"),
        ("get_c", 1, "${target}/c"),
        ("put_d", 1, "${target}/d"),
        ("get_c_2", 1, "${target}/c"),
    ]
    assert reqs[0]["headers"] == {"X-Trace": "one, two", "Authorization": "${main_header_authorization}"}
    assert reqs[1]["body"] == '{"n": 1}'
    assert "tok-abc" not in result.toml()


def test_targets_on_a_one_line_run(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("GET http://127.0.0.1:8080/a\nX-A: 1\n\nPOST http://127.0.0.1:8080/b\n@t.txt\n")
    targets = parse_http(path)
    line = scenario_table(targets[0].url, Options(clients=4, n=100, headers=["X-All: yes"], http2=True), run=True)
    table, secrets = with_targets(line, targets, str(path))
    group = table["groups"]["main"]
    assert group["clients"] == "level" and group["http2"] is True and group["headers"] == {"X-All": "yes"}
    assert "url" not in group and table["vars"] == {"target": "http://127.0.0.1:8080"}
    assert [r["url"] for r in group["requests"]] == ["${target}/a", "${target}/b"]
    assert group["mix_order"] == "in_turn"
    assert table["sweep"] == {"levels": [4], "total": 100} and secrets == {}
    (one,) = parse_http(path)[:1]
    table, _ = with_targets(line, [one], str(path))
    assert table["groups"]["main"]["headers"] == {"X-All": "yes", "X-A": "1"}  # a plain group: the two merged
    assert table["groups"]["main"]["url"] == "${target}/a"


def test_a_header_every_target_has_keeps_the_command_line_s(tmp_path: Path) -> None:
    # built into the group's headers, the targets' shared one replaced -H's table whole: X-Api-Key was never sent
    path = tmp_path / "t.txt"
    both = "Content-Type: a/b\n"
    path.write_text(f"GET http://127.0.0.1:8080/a\n{both}\nGET http://127.0.0.1:8080/b\n{both}")
    line = scenario_table(path.read_text().split()[1], Options(headers=["X-Api-Key: k", "content-type: x/y"]), run=True)
    table, _ = with_targets(line, parse_http(path), str(path))
    assert table["groups"]["main"]["headers"] == {"X-Api-Key": "k", "Content-Type": "a/b"}
    from_raw(table, Source("command line"))  # and it loads


def test_targets_to_two_origins_import_as_a_group_each_and_a_one_line_run_refuses_them(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("GET http://127.0.0.1:8080/a\n\nGET http://127.0.0.1:8080/c\n\nGET http://127.0.0.1:9090/b\n")
    imported = import_targets(path, "http", bodies_dir=str(tmp_path))
    assert list(imported.table["groups"]) == ["main", "127_0_0_1_9090"]
    # each group follows the level, so the mix between origins is not the file's: said, with the file's shares
    (note,) = [n for n in imported.notes if "origins" in n]
    assert "the recording sent main 67%, 127_0_0_1_9090 33% of its requests; the verdict judges main" in note, note
    from_raw(imported.table, Source("t.toml"))  # it loads: each group's requests share its origin
    line = scenario_table("http://127.0.0.1:8080/a", Options(), run=True)
    with pytest.raises(UserError, match=r"its targets go to 2 origins .* a one-line run drives one"):
        with_targets(line, parse_http(path), str(path))


@pytest.mark.parametrize(
    ("text", "fmt", "said"),
    [
        ("get http://h/\n", "http", "targets.txt line 1: 'get http://h/' is not a target; a target starts with a line"),
        ("GET\n", "http", "targets.txt line 1: 'GET' is not a target"),
        ("GET /relative\n", "http", "targets.txt line 1: '/relative' is not an absolute http(s) URL"),
        ("GET http://h/\nX-A 1\n", "http", "targets.txt line 2: 'X-A 1' is neither a header 'Name: value' nor a body"),
        ("GET http://h/\n@nope.bin\n", "http", "targets.txt line 2: the body file 'nope.bin' does not exist"),
        ("GET http://h/\n@/tmp\n", "http", "targets.txt line 2: the body file '/tmp' is a directory; give the file"),
        ("GET http://h:99999/\n", "http", "the URL 'http://h:99999/' cannot be replayed (Port out of range 0-65535)"),
        ("GET http://[::1/x\n", "http", "line 1: the URL 'http://[::1/x' cannot be replayed (Invalid IPv6 URL)"),
        ("GET http://h/\n@b\nX-A: 1\n", "http", "targets.txt line 3: 'X-A: 1' is not a target"),
        ("# only a comment\n", "http", "holds no target"),
        ('{"method": "GET"}\n', "json", 'targets.txt line 1: a JSON target needs "method" and "url"'),
        ("GET http://h/\n", "json", "targets.txt line 1: not JSON (Expecting value, column 1)"),
        ('{"method": "GET", "url": "http://h/", "body": "%%"}\n', "json", '"body" must be base64'),
    ],
)
def test_malformed_targets_are_one_sentence(
    text: str,
    fmt: str,
    said: str,
    *,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "b").write_text("body")
    path = tmp_path / "targets.txt"
    path.write_text(text)
    for argv in (
        ["import", "targets", str(path), "--format", fmt],
        ["run", "--targets", str(path), "--targets-format", fmt],
    ):
        assert said in one_sentence(argv, capsys)


def test_missing_file_and_clashes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.txt"
    path.write_text("GET http://127.0.0.1:8080/\n")
    for argv, said in (
        (["import", "targets", str(tmp_path / "no.txt")], f"cannot read targets file {str(tmp_path / 'no.txt')!r}"),
        (["run", "--targets", str(tmp_path / "no.txt")], "cannot read targets file"),
        (["run", "http://127.0.0.1:8080/", "--targets", str(path)], "give TARGET or --targets FILE, not both"),
        (["run", "--targets", str(path), "-m", "PUT"], "-m/--method: the targets file gives each target's method"),
        (["sweep", "--targets", str(path)], "a one-line sweep needs --levels"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2, err
        assert said in err and len(err.splitlines()) == 1, err


def test_more_distinct_targets_than_a_mix_holds_is_one_sentence_with_the_way_to_replay_them(tmp_path: Path) -> None:
    # an access log's URLs: the engine refused the scenario later, saying to split the mix over groups (no way
    # with --targets, and no help with 200 000 URLs)
    path = tmp_path / "log.txt"
    path.write_text("".join(f"GET http://127.0.0.1:8080/item/{i}\n\n" for i in range(65_536)))
    with pytest.raises(UserError, match=r"log.txt: 65,536 distinct targets, more than a request mix holds \(65,535"):
        import_targets(path, "http", bodies_dir=str(tmp_path))
    line = scenario_table("http://127.0.0.1:8080/", Options(), run=True)
    with pytest.raises(UserError, match=r"--targets .*log.txt: 65,536 distinct targets.* such as \$\{paths.path\}"):
        with_targets(line, parse_http(path), str(path))


def test_a_url_a_request_line_cannot_carry_as_written_is_percent_encoded_as_vegeta_sends_it(tmp_path: Path) -> None:
    # vegeta (Go's net/http) sends /caf%C3%A9; the engine refused the scenario at `knee run` ("invalid uri character")
    path = tmp_path / "t.txt"
    path.write_text("GET http://127.0.0.1:8080/café/a%2Fb?q=a b&r=<x>\n")
    g = import_targets(path, "http", bodies_dir=str(tmp_path)).table["groups"]["main"]
    assert g["url"] == "${target}/caf%C3%A9/a%2Fb?q=a%20b&r=%3Cx%3E"


def test_a_saved_sweep_of_targets_names_body_files_that_outlive_knee(tmp_path: Path) -> None:
    """A binary body (vegeta's json format) is written to a file: beside --save-scenario's file, not to a temporary
    directory removed as knee exits (the saved scenario named a file that was gone). And --ramp is a sweep's shape
    with --targets too (it was refused, "needs --levels or --rates")."""
    from conftest import knee_cli

    binary = bytes(range(256))
    (tmp_path / "t.jsonl").write_text(
        json.dumps({"method": "POST", "url": "http://127.0.0.1:9/u", "body": base64.b64encode(binary).decode()}) + "\n"
    )
    for shape in (["--levels", "1,2"], ["--ramp", "0s:1, 2s:4"]):
        save = tmp_path / "out" / "saved.toml"
        save.parent.mkdir(exist_ok=True)
        args = ("sweep", "--targets", "t.jsonl", "--targets-format", "json", *shape, "--save-scenario", str(save))
        proc = knee_cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        table = tomllib.loads(save.read_text())
        body_file = tmp_path / table["groups"]["main"]["body_file"]
        assert tmp_path / "out" / "bodies" in body_file.parents, body_file
        assert body_file.read_bytes() == binary
        assert table["groups"]["main"].get("rate") == (None if shape[0] == "--levels" else "0s:1, 2s:4")


def test_a_kept_run_of_targets_keeps_its_body_files_under_out(tmp_path: Path) -> None:
    """A kept run's body files (the run directory's scenario.toml names them; --resume reads them again) go under
    <out>/bodies/, named by the bodies' digest: the same file twice, the same directory."""
    binary = b"\x00\xff" * 10
    line = scenario_table("http://127.0.0.1:9/u", Options(clients=1, n=1), run=True)
    (target,) = parse_json_text(tmp_path, {"method": "POST", "url": "http://127.0.0.1:9/u", "body": binary})
    bodies = tmp_path / "runs" / "bodies"
    one, _ = with_targets(line, [target], "t.jsonl", bodies)
    two, _ = with_targets(line, [target], "t.jsonl", bodies)
    path = Path(one["groups"]["main"]["body_file"])
    assert path.parent.parent == bodies and path.read_bytes() == binary
    assert two["groups"]["main"]["body_file"] == str(path)


def parse_json_text(tmp_path: Path, target: dict[str, object]) -> list[object]:
    body = target.pop("body")
    assert isinstance(body, bytes)
    (tmp_path / "t.jsonl").write_text(json.dumps({**target, "body": base64.b64encode(body).decode()}) + "\n")
    return parse_json(tmp_path / "t.jsonl")
