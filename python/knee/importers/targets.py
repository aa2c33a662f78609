"""vegeta's targets files (`vegeta attack -targets FILE`, lib/targets.go) → requests: `knee import targets FILE`,
and `--targets FILE` on `knee run` and `knee sweep`.

The http format: a target is a line `METHOD URL`, then optional `Name: value` header lines, then an optional
`@path/to/body` line; targets are separated by blank lines; `#` starts a comment line. A body file is read as
vegeta reads it, from the current directory (else beside the targets file). The json format
(`--targets-format json`, vegeta's `-format=json`): one object a line, `{"method", "url", "header": {name:
[values]}, "body": base64}`. Each target is a request of the mix, sent in turn in the file's order, as vegeta
sends them (`mix_order = "in_turn"`).
"""

from __future__ import annotations

import atexit
import base64
import binascii
import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from knee.errors import UserError
from knee.importers.build import Imported, Request, build, origin_of, write

FORMATS = ("http", "json")
_METHOD = re.compile(r"^[A-Z]+\s")


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read targets file {str(path)!r}: {exc.strerror}; check the path") from None
    except UnicodeDecodeError:
        raise UserError(f"targets file {str(path)!r} is not text; give vegeta's http or json targets") from None


def _check_url(url: str, where: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (reading it checks it)
    except ValueError as e:  # an unclosed [IPv6 address], a port above 65535
        raise UserError(f"{where}: the URL {url!r} cannot be replayed ({e}); correct it") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise UserError(f"{where}: {url!r} is not an absolute http(s) URL, like http://127.0.0.1:8080/path")


def _body_file(name: str, path: Path, where: str) -> tuple[bytes, str]:
    """The body file `name` and the path it was found at: from the current directory, as vegeta reads it, else
    beside the targets file."""
    for candidate in (Path(name), path.parent / name):
        if candidate.is_file():
            try:
                return candidate.read_bytes(), str(candidate)
            except OSError as exc:
                raise UserError(f"{where}: cannot read the body file {name!r} ({exc.strerror})") from None
    if any(c.is_dir() for c in (Path(name), path.parent / name)):
        raise UserError(f"{where}: the body file {name!r} is a directory; give the file the body is in")
    raise UserError(
        f"{where}: the body file {name!r} does not exist (looked in the current directory, as vegeta does, and "
        f"beside {path.name}); fix the path"
    )


def parse_http(path: Path) -> list[Request]:
    """The targets of a file in vegeta's http format."""
    lines = _read_text(path).splitlines()
    out: list[Request] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        where = f"{path.name} line {i}"
        method, _, url = line.partition(" ")
        if not _METHOD.match(line) or not url.strip():
            raise UserError(
                f"{where}: {line!r} is not a target; a target starts with a line 'METHOD URL', e.g. "
                "'GET http://127.0.0.1:8080/'"
            )
        url = url.strip()
        _check_url(url, where)
        req = Request(method, url)
        while i < len(lines):
            nxt = lines[i].strip()
            if not nxt or _METHOD.match(nxt):
                break
            i += 1
            where = f"{path.name} line {i}"
            if nxt.startswith("#"):
                continue
            if nxt.startswith("@"):
                req.body, req.body_path = _body_file(nxt[1:], path, where)
                break
            name, colon, value = nxt.partition(":")
            if not colon or not name.strip() or not value.strip():
                raise UserError(
                    f"{where}: {nxt!r} is neither a header 'Name: value' nor a body '@FILE' of the target above it"
                )
            req.headers.append((name.strip(), value.strip()))
        out.append(req)
    return out


def _json_target(line: str, where: str) -> Request:
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not JSON ({exc.msg}, column {exc.colno}); one JSON target a line") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("method"), str) or not isinstance(doc.get("url"), str):
        raise UserError(f'{where}: a JSON target needs "method" and "url", e.g. {{"method": "GET", "url": "http://…"}}')
    _check_url(doc["url"], where)
    headers: list[tuple[str, str]] = []
    header: Any = doc.get("header") or {}
    if not isinstance(header, dict):
        raise UserError(f'{where}: "header" must be an object of name: [values]')
    for name, values in header.items():
        for value in values if isinstance(values, list) else [values]:
            headers.append((str(name), str(value)))
    body = None
    if doc.get("body"):
        try:
            body = base64.b64decode(str(doc["body"]), validate=True)
        except (binascii.Error, ValueError):
            raise UserError(f'{where}: "body" must be base64 (vegeta\'s JSON targets encode it so)') from None
    return Request(doc["method"], doc["url"], headers, body)


def parse_json(path: Path) -> list[Request]:
    """The targets of a file in vegeta's json format."""
    return [
        _json_target(line, f"{path.name} line {n}")
        for n, line in enumerate(_read_text(path).splitlines(), 1)
        if line.strip()
    ]


def read_targets(path: Path, fmt: str) -> list[Request]:
    """The targets of `path` in format `fmt` ("http" or "json"); at least one."""
    targets = parse_json(path) if fmt == "json" else parse_http(path)
    if not targets:
        raise UserError(f"targets file {str(path)!r} holds no target; a target is a line 'METHOD URL'")
    return targets


# The most requests one mix holds (each counted and timed apart: the engine's limit, crates/engine/src/spec/http.rs).
MIX_MOST = 65_535


def _not_too_many(targets: list[Request], source: str) -> None:
    """A targets file of more distinct targets than a mix holds (one made from an access log) is one sentence naming
    the file and the way to replay it: a data source the URLs are filled from."""
    distinct = {(t.method, t.url, tuple(t.headers), t.body, t.body_path) for t in targets}
    if len(distinct) > MIX_MOST:
        raise UserError(
            f"{source}: {len(distinct):,} distinct targets, more than a request mix holds ({MIX_MOST:,}, each counted "
            "and timed apart): put what varies (the paths, the ids) in a data file and fill one request's URL from "
            "it, such as ${paths.path} (docs/scenarios.md, Data and request mixes)"
        )


def import_targets(path: Path, fmt: str, *, bodies_dir: str) -> Imported:
    """The scenario of a targets file: a group per origin, its targets a mix sent in turn."""
    targets = read_targets(path, fmt)
    _not_too_many(targets, str(path))
    return build(
        targets,
        name=path.stem,
        description=f"imported from the vegeta targets file {path.name}: {len(targets)} targets",
        bodies_dir=bodies_dir,
        by_origin=True,
        in_turn=True,
    )


def with_targets(
    line: dict[str, Any], targets: list[Request], source: str, bodies_dir: Path | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """`--targets FILE` on `knee run` / `knee sweep`: the tables of a one-line run or sweep (`line`, built for the
    first target's URL) with `targets` (read from the file `source`) as its group's requests, and the values of
    the secrets their credentials became (for `knee.scenario.from_raw`). The command line's -H and -C are every
    target's defaults. A body the scenario cannot hold inline (binary, or a file holding `${`) is written to a file
    under `bodies_dir`, in a directory named by the bodies' digest (the scenario then names files that stay: a saved
    scenario's, and a kept run's, which --resume reads again), else to a temporary directory removed at exit."""
    _not_too_many(targets, f"--targets {source}")
    origins = list(dict.fromkeys(origin_of(t.url) for t in targets))
    if len(origins) > 1:
        raise UserError(
            f"--targets {source}: its targets go to {len(origins)} origins ({', '.join(origins)}); a one-line run "
            f"drives one: give one origin's targets, or `knee import targets {source}` (a group per origin) and "
            "run that scenario"
        )
    if bodies_dir is None:
        bodies = tempfile.mkdtemp(prefix="knee-targets-")
        atexit.register(shutil.rmtree, bodies, ignore_errors=True)
    else:
        digest = hashlib.sha256()
        for t in targets:
            digest.update(b"%d:" % len(t.body or b"") + (t.body or b""))
        bodies = str(bodies_dir / f"targets-{digest.hexdigest()[:16]}")
    imported = build(
        targets,
        name=line.get("name") or Path(source).stem,
        description=f"the vegeta targets of {source}: {len(targets)} targets",
        bodies_dir=bodies,
        inline_max=None,
        in_turn=True,
    )
    write(imported, None)
    group = dict(line["groups"]["main"])
    for key in ("url", "method", "body", "body_file"):
        group.pop(key, None)
    mine = {k: v for k, v in imported.table["groups"]["main"].items() if k != "clients"}
    for key in ("headers", "cookies"):
        if key in group and key in mine:  # the targets' own (shared by all, or one target's) over the defaults
            same = str.lower if key == "headers" else str
            given = {same(k) for k in mine[key]}
            mine = {**mine, key: {**{k: v for k, v in group[key].items() if same(k) not in given}, **mine[key]}}
    table = {**line, **{k: v for k, v in imported.table.items() if k in ("secrets", "vars")}}
    table["groups"] = {"main": {**group, **mine}}
    return table, {name: s.value for name, s in imported.secrets.items()}
