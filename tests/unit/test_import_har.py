"""`knee import har`: a HAR 1.2 recording → a scenario (knee.importers.har). The TOML is read back with tomllib; a
recording of one request loads as a scenario today; credentials are secrets, never written."""

from __future__ import annotations

import base64
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from cli import one_sentence
from knee.cli import main
from knee.errors import UserError
from knee.importers.build import request_name
from knee.importers.har import import_har
from knee.scenario import read_scenario

PAGE = "http://127.0.0.1:8080"


def entry(
    url: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    *,
    status: int = 200,
    mime: str = "text/html",
    post: dict[str, Any] | None = None,
    resource: str | None = None,
) -> dict[str, Any]:
    req: dict[str, Any] = {
        "method": method,
        "url": url,
        "httpVersion": "HTTP/1.1",
        "headers": [{"name": k, "value": v} for k, v in (headers or {}).items()],
        "cookies": [],
        "queryString": [],
        "headersSize": -1,
        "bodySize": -1,
    }
    if post is not None:
        req["postData"] = post
    e: dict[str, Any] = {"request": req, "response": {"status": status, "content": {"mimeType": mime}}}
    if resource:
        e["_resourceType"] = resource
    return e


def har(tmp_path: Path, *entries: dict[str, Any], name: str = "site.har") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "t"}, "entries": list(entries)}}))
    return path


def imported(tmp_path: Path, *entries: dict[str, Any], **kw: Any) -> tuple[dict[str, Any], Any]:
    kw.setdefault("include_assets", False)
    kw.setdefault("origins", [])
    result = import_har(har(tmp_path, *entries), bodies_dir=str(tmp_path / "bodies"), **kw)
    text = result.toml()
    assert tomllib.loads(text) == result.table
    return result.table, result


def test_each_distinct_request_once_weighted_by_its_count(tmp_path: Path) -> None:
    index = entry(f"{PAGE}/index.html?x=1", headers={"Accept": "text/html"})
    login = entry(
        f"{PAGE}/api/login",
        "POST",
        {"Content-Type": "application/json"},
        post={"mimeType": "application/json", "text": '{"user": "a"}'},
    )
    table, _ = imported(tmp_path, index, login, index, index)
    assert table["vars"] == {"target": PAGE}
    group = table["groups"]["main"]
    assert group["kind"] == "http" and group["clients"] == "level"
    reqs = group["requests"]
    assert [(r["name"], r["weight"], r["method"], r["url"]) for r in reqs] == [
        ("get_index", 3, "GET", "${target}/index.html?x=1"),
        ("post_api_login", 1, "POST", "${target}/api/login"),
    ]
    assert reqs[1]["body"] == '{"user": "a"}'
    assert reqs[1]["headers"] == {"Content-Type": "application/json"}
    assert "expect_status" not in reqs[0]
    assert table["sweep"] == {"levels": "auto", "duration": "10s"}


def test_same_url_different_body_or_header_is_another_request(tmp_path: Path) -> None:
    a = entry(f"{PAGE}/q", "POST", post={"mimeType": "text/plain", "text": "a"})
    b = entry(f"{PAGE}/q", "POST", post={"mimeType": "text/plain", "text": "b"})
    c = entry(f"{PAGE}/q", "POST", {"X-Mode": "1"}, post={"mimeType": "text/plain", "text": "a"})
    reqs = imported(tmp_path, a, b, c, a)[0]["groups"]["main"]["requests"]
    assert [(r["name"], r["weight"]) for r in reqs] == [("post_q", 2), ("post_q_2", 1), ("post_q_3", 1)]


def test_connection_headers_are_left_out(tmp_path: Path) -> None:
    headers = {
        ":authority": "127.0.0.1:8080",
        ":method": "GET",
        ":path": "/",
        ":scheme": "http",
        "Host": "127.0.0.1:8080",
        "Connection": "keep-alive",
        "Keep-Alive": "timeout=5",
        "Transfer-Encoding": "chunked",
        "Upgrade": "h2c",
        "TE": "trailers",
        "Content-Length": "12",
        "Accept-Language": "en",
    }
    group = imported(tmp_path, entry(f"{PAGE}/", headers=headers))[0]["groups"]["main"]
    assert group["headers"] == {"Accept-Language": "en"}
    other_host = imported(tmp_path, entry(f"{PAGE}/", headers={"Host": "www.example.org"}))[0]
    assert other_host["groups"]["main"]["headers"] == {"Host": "www.example.org"}


def test_one_request_is_a_plain_group_that_loads(tmp_path: Path) -> None:
    table, result = imported(tmp_path, entry(f"{PAGE}/hello", headers={"Accept": "*/*"}))
    group = table["groups"]["main"]
    assert "requests" not in group and "name" not in group and "weight" not in group
    assert group["url"] == "${target}/hello" and group["method"] == "GET"
    loaded = read_scenario(result.toml(), "site.toml")
    assert loaded.scenario.groups["main"].url == f"{PAGE}/hello"  # type: ignore[union-attr]


def test_cookies_and_credentials_are_secrets_never_written(tmp_path: Path) -> None:
    e = entry(
        f"{PAGE}/account",
        headers={
            "Cookie": "session=s3cr3t-cookie; theme=dark",
            "Authorization": "Bearer tok-123456",
            "X-Api-Key": "key-987654",
            "Accept": "text/html",
        },
    )
    table, result = imported(tmp_path, e)
    text = result.toml()
    for value in ("s3cr3t-cookie", "dark", "tok-123456", "key-987654"):
        assert value not in text
    group = table["groups"]["main"]
    assert group["cookies"] == {"session": "${main_cookie_session}", "theme": "${main_cookie_theme}"}
    assert group["headers"] == {
        "Authorization": "${main_header_authorization}",
        "X-Api-Key": "${main_header_x_api_key}",
        "Accept": "text/html",
    }
    assert table["secrets"] == [
        "main_header_authorization",
        "main_header_x_api_key",
        "main_cookie_session",
        "main_cookie_theme",
    ]
    assert result.secrets["main_cookie_session"].value == "s3cr3t-cookie"
    secrets = {name: s.value for name, s in result.secrets.items()}
    loaded = read_scenario(text, "site.toml", secrets=secrets)
    group_run = loaded.scenario.groups["main"]
    assert group_run.cookies["session"] == "s3cr3t-cookie"  # type: ignore[union-attr]
    assert "s3cr3t-cookie" not in loaded.record.to_toml()


def test_a_cookie_that_changed_is_a_second_secret(tmp_path: Path) -> None:
    a = entry(f"{PAGE}/a", headers={"Cookie": "session=one"})
    b = entry(f"{PAGE}/b", headers={"Cookie": "session=two"})
    c = entry(f"{PAGE}/c", headers={"Cookie": "session=one"})
    table, result = imported(tmp_path, a, b, c)
    reqs = table["groups"]["main"]["requests"]
    assert [r["cookies"]["session"] for r in reqs] == [
        "${main_cookie_session}",
        "${main_cookie_session_2}",
        "${main_cookie_session}",
    ]
    assert {n: s.value for n, s in result.secrets.items()} == {
        "main_cookie_session": "one",
        "main_cookie_session_2": "two",
    }


def test_headers_every_request_shares_are_the_groups(tmp_path: Path) -> None:
    h = {"Accept-Language": "fr", "Cookie": "sid=1"}
    table, _ = imported(tmp_path, entry(f"{PAGE}/a", headers=h), entry(f"{PAGE}/b", headers=h))
    group = table["groups"]["main"]
    assert group["headers"] == {"Accept-Language": "fr"}
    assert group["cookies"] == {"sid": "${main_cookie_sid}"}
    assert all("headers" not in r and "cookies" not in r for r in group["requests"])


def test_static_assets_are_left_out_unless_asked(tmp_path: Path) -> None:
    entries = [
        entry(f"{PAGE}/"),
        entry(f"{PAGE}/app.css", mime="text/css"),
        entry(f"{PAGE}/app.js", mime="application/javascript"),
        entry(f"{PAGE}/logo", mime="image/png"),
        entry(f"{PAGE}/font.woff2", mime="application/octet-stream"),
        entry(f"{PAGE}/clip", mime="", resource="media"),
        entry(f"{PAGE}/api/items", mime="application/json"),
    ]
    table, result = imported(tmp_path, *entries)
    assert [r["url"] for r in table["groups"]["main"]["requests"]] == ["${target}/", "${target}/api/items"]
    assert any("left out 5 static assets" in n and "--include-assets" in n for n in result.notes)
    every = imported(tmp_path, *entries, include_assets=True)[0]
    assert len(every["groups"]["main"]["requests"]) == 7


def test_the_pages_origin_unless_origins_are_named(tmp_path: Path) -> None:
    entries = [
        entry(f"{PAGE}/"),
        entry("https://api.example.com/v1/items", mime="application/json"),
        entry("https://analytics.example.net/collect", "POST", post={"mimeType": "text/plain", "text": "x"}),
        entry(f"{PAGE}/next"),
    ]
    table, result = imported(tmp_path, *entries)
    assert list(table["groups"]) == ["main"] and table["vars"] == {"target": PAGE}
    assert any(
        "left out 2 requests to https://api.example.com, https://analytics.example.net" in n for n in result.notes
    )
    table = imported(tmp_path, *entries, origins=["127.0.0.1:8080", "api.example.com"])[0]
    assert list(table["groups"]) == ["main", "api_example_com"]
    assert table["vars"] == {"target": PAGE, "target_api_example_com": "https://api.example.com"}
    assert table["groups"]["api_example_com"]["url"] == "${target_api_example_com}/v1/items"
    assert len(imported(tmp_path, *entries, origins=["*"])[0]["groups"]) == 3
    with pytest.raises(UserError, match=r"--origin nowhere.org: .* has no request to it; its origins are http://127"):
        imported(tmp_path, *entries, origins=["nowhere.org"])


def test_an_error_status_recorded_is_the_expected_one(tmp_path: Path) -> None:
    table = imported(
        tmp_path,
        entry(f"{PAGE}/missing", status=404),
        entry(f"{PAGE}/flaky", status=503),
        entry(f"{PAGE}/flaky", status=200),
        entry(f"{PAGE}/moved", status=302),
    )[0]
    reqs = {r["name"]: r for r in table["groups"]["main"]["requests"]}
    assert reqs["get_missing"]["expect_status"] == [[404, 404]]
    assert reqs["get_flaky"]["expect_status"] == [[200, 399], [503, 503]]
    assert "expect_status" not in reqs["get_moved"]


def test_bodies_binary_or_large_go_to_files_and_a_recorded_placeholder_is_escaped(tmp_path: Path) -> None:
    binary = bytes(range(256))
    big = "x" * 5000
    table, result = imported(
        tmp_path,
        entry(
            f"{PAGE}/upload",
            "PUT",
            {"Content-Type": "application/octet-stream"},
            post={
                "mimeType": "application/octet-stream",
                "text": base64.b64encode(binary).decode(),
                "encoding": "base64",
            },
        ),
        entry(f"{PAGE}/big", "POST", {"Content-Type": "application/json"}, post={"mimeType": "x", "text": big}),
        entry(f"{PAGE}/tpl", "POST", post={"mimeType": "text/plain", "text": "hello ${name}"}),
        entry(
            f"{PAGE}/form",
            "POST",
            post={
                "mimeType": "application/x-www-form-urlencoded",
                "params": [{"name": "a b", "value": "1&2"}, {"name": "c", "value": "3"}],
            },
        ),
    )
    reqs = {r["name"]: r for r in table["groups"]["main"]["requests"]}
    bodies = tmp_path / "bodies"
    assert reqs["put_upload"]["body_file"] == str(bodies / "main_put_upload.bin")
    assert reqs["post_big"]["body_file"] == str(bodies / "main_post_big.json")
    # knee fills ${…} in bodies: a recorded one is sent as it was, escaped
    assert reqs["post_tpl"]["body"] == "hello $${name}"
    assert reqs["post_form"]["body"] == "a+b=1%262&c=3"
    assert result.bodies[str(bodies / "main_put_upload.bin")] == binary
    assert result.bodies[str(bodies / "main_post_big.json")] == big.encode()


def test_request_names() -> None:
    assert request_name("GET", "http://h/index.html?x=1") == "get_index"
    assert request_name("GET", "http://h/") == "get_root"
    assert request_name("POST", "http://h/api/v1/users/42/Profile%20Pic.png") == "post_users_42_profile_pic"
    assert request_name("DELETE", "http://h/a/b/c/d") == "delete_b_c_d"


def test_command_writes_the_file_and_says_what_to_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = har(
        tmp_path, entry(f"{PAGE}/", headers={"Cookie": "session=abcdef"}), entry(f"{PAGE}/a.png", mime="image/png")
    )
    out = tmp_path / "site.toml"
    main(["import", "har", str(path), "-o", str(out)])
    err = capsys.readouterr().err
    assert "main_cookie_session: the cookie 'session' of GET /" in err
    assert "left out 1 static asset " in err
    assert "abcdef" not in out.read_text() and "abcdef" not in err
    assert tomllib.loads(out.read_text())["secrets"] == ["main_cookie_session"]


def test_bad_recordings_are_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.har"
    assert one_sentence(["import", "har", str(missing)], capsys) == (
        f"cannot read HAR {str(missing)!r}: No such file or directory; check the path"
    )
    bad = tmp_path / "bad.har"
    bad.write_text("<html>not a recording</html>")
    said = one_sentence(["import", "har", str(bad)], capsys)
    assert said.startswith(f"{str(bad)!r} is not a HAR file: it is not JSON (line 1, column 1")
    for doc in ({"log": {}}, {"entries": []}, [1, 2]):
        bad.write_text(json.dumps(doc))
        assert "has no log.entries, so it is not a HAR 1.2 recording" in one_sentence(
            ["import", "har", str(bad)], capsys
        )
    bad.write_text(json.dumps({"log": {"entries": []}}))
    assert "records no request" in one_sentence(["import", "har", str(bad)], capsys)
    bad.write_text(json.dumps({"log": {"entries": [{"request": {"url": "http://h/"}}]}}))
    assert "entry 1 has no request.method and request.url" in one_sentence(["import", "har", str(bad)], capsys)
    multipart = {"mimeType": "multipart/form-data; boundary=x", "params": [{"name": "f", "value": "v"}]}
    bad.write_text(
        json.dumps({"log": {"entries": [{"request": {"method": "POST", "url": "http://h/", "postData": multipart}}]}})
    )
    assert "a multipart body recorded as params, without its text" in one_sentence(["import", "har", str(bad)], capsys)
    for url, why in (("http://[::1/x", "Invalid IPv6 URL"), ("http://h:99999/", "Port out of range 0-65535")):
        bad.write_text(json.dumps({"log": {"entries": [{"request": {"method": "GET", "url": url}}]}}))
        assert f"the URL {url!r} cannot be replayed ({why})" in one_sentence(["import", "har", str(bad)], capsys)
    only_assets = har(tmp_path, entry(f"{PAGE}/a.css", mime="text/css"), name="assets.har")
    said = one_sentence(["import", "har", str(only_assets)], capsys)
    assert said.endswith("all 1 of its http(s) requests are static assets; pass --include-assets to keep them")
