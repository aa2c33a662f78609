"""`knee import curl -- curl ARGS…`: the request curl sends, as a scenario (knee.importers.curl); curl's flags as curl
reads them, an unknown one refused by name. What nginx sees of both is held together in
tests/integration/test_import.py."""

from __future__ import annotations

import base64
import tomllib
from pathlib import Path
from typing import Any

import pytest

from cli import one_sentence
from knee.cli import main
from knee.errors import UserError
from knee.importers.build import write
from knee.importers.curl import curl_version, import_curl
from knee.scenario import read_scenario

URL = "http://127.0.0.1:8080/api/login"
# what curl sends of its own unless told otherwise (the version of the curl on this machine)
AGENT = {"User-Agent": f"curl/{curl_version()}"}
OWN = {**AGENT, "Accept": "*/*"}


def group(*args: str, bodies: str = "bodies") -> tuple[dict[str, Any], Any]:
    result = import_curl(["curl", *args], bodies_dir=bodies)
    table = tomllib.loads(result.toml())
    assert table == result.table
    return table["groups"]["main"], result


def test_data_is_a_form_post_joined_with_ampersands(tmp_path: Path) -> None:
    form = tmp_path / "form.txt"
    form.write_text("c=3\r\nd=4\n")
    g, result = group("-d", "a=1", "--data", "b=2", "-d", f"@{form}", "--data-raw", "@literal", URL)
    assert g["method"] == "POST"
    assert g["url"] == "${target}/api/login"
    assert result.table["vars"] == {"target": "http://127.0.0.1:8080"}
    assert g["body"] == "a=1&b=2&c=3d=4&@literal"  # -d @FILE drops CR and LF, as curl does
    assert g["headers"] == {"Content-Type": "application/x-www-form-urlencoded", **OWN}


def test_headers_method_and_the_flags_that_set_headers() -> None:
    g, _ = group(
        "-X",
        "PUT",
        "-H",
        "Content-Type: application/json",
        "-H",
        "X-Trace:  abc ",
        "-HX-Empty;",
        "-A",
        "knee-test/1",
        "-e",
        "http://ref.example/",
        "--compressed",
        "--data-binary",
        '{"a": 1}',
        URL,
    )
    assert g["method"] == "PUT"
    assert g["headers"] == {
        "Content-Type": "application/json",
        "X-Trace": "abc",
        "X-Empty": "",
        "User-Agent": "knee-test/1",
        "Referer": "http://ref.example/",
        "Accept-Encoding": "deflate, gzip, br, zstd",
        "Accept": "*/*",
    }
    assert g["body"] == '{"a": 1}'


def test_short_flags_together_and_attached_values() -> None:
    g, _ = group("-sSkL", "-XDELETE", "-HAccept: text/plain", "https://127.0.0.1:8443/x")
    assert g["method"] == "DELETE" and g["insecure"] is True
    assert g["headers"] == {"Accept": "text/plain", **AGENT}
    g, _ = group("-H", "User-Agent:", "-H", "Accept:", URL)  # curl's 'Name:' removes its own
    assert "headers" not in g
    g, _ = group("-sX", "PATCH", "-d", "x", "https://127.0.0.1:8443/x")
    assert g["method"] == "PATCH"


def test_user_and_cookies_are_secrets(tmp_path: Path) -> None:
    g, result = group("-u", "alice:pa:ss", "-b", "sid=xyz123; theme=dark", "-b", "lang=fr", URL)
    assert g["headers"] == {"Authorization": "${main_header_authorization}", **OWN}
    assert g["cookies"] == {"sid": "${main_cookie_sid}", "theme": "${main_cookie_theme}", "lang": "${main_cookie_lang}"}
    basic = result.secrets["main_header_authorization"]
    assert basic.value == "Basic " + base64.b64encode(b"alice:pa:ss").decode()
    assert "printf %s 'alice:PASSWORD' | base64" in basic.what
    text = result.toml()
    assert "xyz123" not in text and "pa:ss" not in text and basic.value not in text
    assert result.table["secrets"] == [
        "main_header_authorization",
        "main_cookie_sid",
        "main_cookie_theme",
        "main_cookie_lang",
    ]
    loaded = read_scenario(text, "curl.toml", secrets={n: s.value for n, s in result.secrets.items()})
    assert loaded.scenario.groups["main"].cookies == {"sid": "xyz123", "theme": "dark", "lang": "fr"}  # type: ignore[union-attr]


def test_credentials_in_the_url_and_bearer_tokens() -> None:
    g, result = group("http://bob:pw@127.0.0.1:8080/x")
    assert g["url"] == "${target}/x"
    assert "bob:pw" not in result.toml()  # the description said the URL as given, password and all
    assert result.secrets["main_header_authorization"].value == "Basic " + base64.b64encode(b"bob:pw").decode()
    g, result = group("--oauth2-bearer", "tok", "-H", "X-Api-Token: t2", URL)
    assert g["headers"] == {
        "Authorization": "${main_header_authorization}",
        "X-Api-Token": "${main_header_x_api_token}",
        **OWN,
    }


def test_a_cookie_name_sent_twice_keeps_the_header_as_recorded() -> None:
    # a table of cookies kept the last of the two: servers read the first, and the replay had another session
    g, result = group("-b", "session=new; theme=dark", "-b", "session=old", URL)
    assert "cookies" not in g and g["headers"] == {"Cookie": "${main_header_cookie}", **OWN}
    assert result.secrets["main_header_cookie"].value == "session=new; theme=dark; session=old"


def test_get_head_and_url_forms() -> None:
    g, _ = group("-G", "-d", "q=1", "--data-urlencode", "name=a b&c", "http://127.0.0.1:8080/search?x=0")
    assert g["method"] == "GET" and g["url"] == "${target}/search?x=0&q=1&name=a+b%26c"
    assert "body" not in g
    g, _ = group("-I", "--url", "127.0.0.1:8080/health")
    assert g["method"] == "HEAD" and g["url"] == "${target}/health"
    g, _ = group("--json", '{"k": true}', URL)
    assert g["method"] == "POST" and g["body"] == '{"k": true}'
    assert g["headers"] == {"Content-Type": "application/json", "Accept": "application/json", **AGENT}


def test_data_urlencode_forms(tmp_path: Path) -> None:
    f = tmp_path / "v.txt"
    f.write_text("x y")
    g, _ = group(
        "--data-urlencode", "a b", "--data-urlencode", "=c&d", "--data-urlencode", "n=é", "--data-urlencode",
        f"m@{f}", URL,
    )  # fmt: skip
    assert g["body"] == "a+b&c%26d&n=%C3%A9&m=x+y"


def test_binary_data_file_is_referenced_as_it_is(tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))
    g, result = group("--data-binary", f"@{blob}", "-H", "Content-Type: application/octet-stream", URL)
    assert g["body_file"] == str(blob) and result.bodies == {}
    g, result = group("--data-binary", f"@{blob}", "-d", "x=1", URL, bodies=str(tmp_path / "b"))
    assert g["body_file"] == str(tmp_path / "b" / "main_post_api_login.txt")  # the joined body is not the file's
    assert result.bodies[g["body_file"]] == blob.read_bytes() + b"&x=1"


def test_json_pieces_are_appended_and_a_recorded_placeholder_is_escaped(tmp_path: Path) -> None:
    g, _ = group("--json", '{ "drink":', "--json", ' "coffee" }', URL)  # curl's own example
    assert g["body"] == '{ "drink": "coffee" }'  # joined by & it was no JSON
    # a recorded ${ in a header, or in a body file knee would template, is sent as recorded
    big = tmp_path / "big.json"
    big.write_text('{"t": "${user}", "pad": "' + "x" * 5000 + '"}')
    g, result = group("-H", "X-Tpl: ${user}", "--data-binary", f"@{big}", URL, bodies=str(tmp_path / "b"))
    assert g["headers"]["X-Tpl"] == "$${user}"
    assert g["body_file"] != str(big) and result.bodies[g["body_file"]] == big.read_bytes()
    write(result, None)
    read_scenario(result.toml(), "s.toml")  # it loads (the file's ${user} named no data source)


def test_tls_and_connection_flags(tmp_path: Path) -> None:
    g, result = group(
        "--cert", "client.pem:keypass", "--key", "client.key", "--cacert", "ca.pem",
        "--capath", "/etc/grid-security/certificates", "--http2", "--tlsv1.3",
        "--max-time", "5", "--connect-timeout", "1.5", "https://127.0.0.1:8443/",
    )  # fmt: skip
    assert g["tls"] == {
        "cert": "client.pem",
        "password": "${main_tls_password}",
        "key": "client.key",
        "cacert": "ca.pem",
        "capath": "/etc/grid-security/certificates",
        "version": "1.3",
    }
    assert g["http2"] is True and g["timeout"] == "5s" and g["connect_timeout"] == "1.5s"
    assert result.secrets["main_tls_password"].value == "keypass" and "keypass" not in result.toml()
    with pytest.raises(UserError, match="apply to https:// URLs only"):
        group("--cacert", "ca.pem", URL)


@pytest.mark.parametrize(
    ("args", "connect_to", "note"),
    [
        (["--resolve", "svc.example:443:10.0.0.5"], "10.0.0.5", None),
        (["--resolve", "+svc.example:443:10.0.0.5,10.0.0.6"], "10.0.0.5", None),  # the first address
        (["--resolve", "*:443:[::1]"], "[::1]", None),
        (["--resolve", "svc.example:8443:10.0.0.5"], None, "--resolve svc.example:8443:10.0.0.5: not this URL's"),
        (["--resolve", "other:443:10.0.0.5", "--resolve", "SVC.example:443:10.0.0.7"], "10.0.0.7", "other:443"),
        (["--connect-to", "::10.0.0.5:9443"], "10.0.0.5:9443", None),
        (["--connect-to", "svc.example:443:[::1]:"], "[::1]:443", None),
        (["--connect-to", "svc.example::backend.internal:8080"], "backend.internal:8080", None),
        (["--connect-to", "svc.example:443::"], None, None),  # to itself: nothing changes
        (["--connect-to", "::10.0.0.9:1", "--resolve", "svc.example:443:10.0.0.5"], "10.0.0.9:1", None),  # in order
    ],
)
def test_resolve_and_connect_to_are_where_it_connects(
    args: list[str], connect_to: str | None, note: str | None
) -> None:
    """curl --resolve and --connect-to that match the URL's host and port: where the group connects (the URL's
    host still its Host header and TLS name); one that does not is passed over, as curl does, and said."""
    g, result = group(*args, "https://svc.example/x")
    assert g.get("connect_to") == connect_to and g["url"] == "${target}/x"
    passed_over = [n for n in result.notes if "not used" in n]
    assert len(passed_over) == (note is not None) and all(note in n for n in passed_over), passed_over


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--frobnicate", URL], "curl --frobnicate: knee import does not know this flag and will not ignore it"),
        (["-sZ", URL], "curl -Z: knee import does not know this flag"),
        (["-F", "a=@x", URL], "curl -F is not something knee can replay (multipart forms"),
        (["--proxy", "http://p:3128", URL], "curl --proxy is not something knee can replay (proxies"),
        (["--resolve", "h:443", URL], "--resolve h:443: curl reads HOST:PORT:ADDRESS there"),
        (["--connect-to", "a:443:b:https", URL], "--connect-to a:443:b:https: curl reads HOST:PORT:CONNECT-TO-HOST"),
        (["--resolve", "a:x:10.0.0.1", URL], "--resolve a:x:10.0.0.1: curl reads HOST:PORT:ADDRESS there"),
        (
            ["--connect-to", "h:443:x", URL],
            "--connect-to h:443:x: curl reads HOST:PORT:CONNECT-TO-HOST:CONNECT-TO-PORT",
        ),
        (["-H"], "curl -H needs a value (none follows it)"),
        (["-H", "NoColon", URL], "-H 'NoColon': a header looks like 'Name: value'"),
        (["-u", "alice", URL], "-u alice: no password (curl would ask for it); give -u alice:PASSWORD"),
        (["-b", "cookies.txt", URL], "-b cookies.txt: curl reads a cookie file there"),
        (["-d", "@/nonexistent/file", URL], "-d @/nonexistent/file: cannot read it (No such file or directory)"),
        (["-d", "@-", URL], "-d @-: knee import reads no standard input"),
        (["-X", "GET"], "the curl command names no URL"),
        ([URL, "http://other/"], "the curl command names 2 URLs"),
        (["ftp://h/x"], "curl URL 'ftp://h/x': knee replays http:// and https:// requests only"),
        (["--data=x", URL], "--data=x: curl takes the value after a space, --data x"),
        (["--max-time", "soon", URL], "--max-time soon: a number of seconds"),
        (["--max-time", "nan", URL], "--max-time nan: a number of seconds above 0"),
        (["-m", "-1", URL], "-m -1: a number of seconds above 0"),
        (["--connect-timeout", "1e309", URL], "--connect-timeout 1e309: a number of seconds above 0"),
        (["http://u:pw@127.0.0.1:99999/"], "the URL 'http://127.0.0.1:99999/' cannot be replayed (Port out of range"),
        (["http://[::1/x"], "the URL 'http://[::1/x' cannot be replayed (Invalid IPv6 URL)"),
    ],
)
def test_mistakes_are_one_sentence(args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert said in one_sentence(["import", "curl", "--", "curl", *args], capsys)


def test_command_line_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With `--` everything after is curl's (its -o too); without, knee's -o comes before `curl`."""
    out = tmp_path / "c.toml"
    main(["import", "curl", "-o", str(out), "--", "curl", "-s", "-o", "/dev/null", "-d", "a=1", URL])
    assert tomllib.loads(out.read_text())["groups"]["main"]["body"] == "a=1"
    main(["import", "curl", "curl", "-sS", URL])
    captured = capsys.readouterr()
    assert tomllib.loads(captured.out)["groups"]["main"]["method"] == "GET"
    loaded = read_scenario(captured.out, "curl.toml")
    assert loaded.scenario.groups["main"].url == URL  # type: ignore[union-attr]
