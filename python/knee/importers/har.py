"""`knee import har FILE`: a HAR 1.2 recording (a browser's DevTools "Export HAR", a proxy's) → a scenario.

Every http(s) request of the recording is kept with its method, URL, headers and body, but for static assets
(images, stylesheets, scripts, fonts, media: by the response's MIME type, the browser's resource type, or the
URL's extension) unless `include_assets`, and requests to origins other than the page's unless named by `origins`.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, urlsplit

from knee.errors import UserError
from knee.importers.build import Imported, Request, build, origin_of, replayable

_ASSET_TYPES = frozenset({"image", "stylesheet", "script", "font", "media", "texttrack", "manifest"})
_ASSET_MIME = ("image/", "font/", "audio/", "video/", "text/css", "javascript", "application/font", "application/wasm")
_ASSET_EXT = frozenset(
    [
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
        ".avif",
        ".bmp",
        ".ico",
        ".svg",
        ".css",
        ".js",
        ".mjs",
        ".map",
        ".woff",
        ".woff2",
        ".ttf",
        ".otf",
        ".eot",
        ".mp3",
        ".mp4",
        ".m4a",
        ".ogg",
        ".oga",
        ".wav",
        ".webm",
        ".flac",
        ".vtt",
        ".wasm",
    ]
)
_SKIPPED_METHODS = frozenset({"CONNECT"})


def read_har(path: Path) -> list[dict[str, Any]]:
    """The entries of the HAR file at `path`; one sentence (UserError) when it cannot be read or is not a HAR."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise UserError(f"cannot read HAR {str(path)!r}: {exc.strerror}; check the path") from None
    except UnicodeDecodeError:
        raise UserError(f"{str(path)!r} is not a HAR file: it is not UTF-8 text (a HAR is JSON)") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{str(path)!r} is not a HAR file: it is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "save the recording as HAR (DevTools: Network, Export HAR)"
        ) from None
    log = doc.get("log") if isinstance(doc, dict) else None
    entries = log.get("entries") if isinstance(log, dict) else None
    if not isinstance(entries, list):
        raise UserError(
            f"{str(path)!r} has no log.entries, so it is not a HAR 1.2 recording; save the recording as HAR "
            "(DevTools: Network, Export HAR)"
        )
    if not entries:
        raise UserError(f"{str(path)!r} records no request (log.entries is empty); record the page loading again")
    return entries


def is_asset(entry: dict[str, Any]) -> bool:
    """A static asset: an image, stylesheet, script, font or media, by the browser's resource type, the response's
    MIME type or the URL's extension."""
    if str(entry.get("_resourceType", "")).lower() in _ASSET_TYPES:
        return True
    content = (entry.get("response") or {}).get("content") or {}
    mime = str(content.get("mimeType", "")).lower()
    if any(m in mime for m in _ASSET_MIME):
        return True
    path = urlsplit(str((entry.get("request") or {}).get("url", ""))).path.lower()
    return any(path.endswith(ext) for ext in _ASSET_EXT)


def _body(post: Any, where: str) -> bytes | None:
    """postData's text (base64 when its encoding says so), or its form params url-encoded."""
    if not isinstance(post, dict):
        return None
    text = post.get("text")
    if isinstance(text, str):
        if str(post.get("encoding", "")).lower() == "base64":
            try:
                return base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                raise UserError(f"{where}: postData.text says base64 but is not; fix or remove the entry") from None
        return text.encode()
    params = post.get("params")
    if isinstance(params, list) and params:
        if "multipart/" in str(post.get("mimeType", "")).lower():  # its parts, boundary and files are not in params
            raise UserError(
                f"{where}: a multipart body recorded as params, without its text, cannot be replayed as it was sent; "
                "record it again with the body (postData.text), or remove the entry"
            )
        pairs = [f"{quote_plus(str(p.get('name', '')))}={quote_plus(str(p.get('value', '')))}" for p in params]
        return "&".join(pairs).encode()
    return None


def _request(entry: Any, n: int, source: str) -> Request | None:
    """Entry `n` as a Request; None for what cannot be replayed over http(s) (data:, ws:, CONNECT)."""
    where = f"{source} entry {n}"
    req = entry.get("request") if isinstance(entry, dict) else None
    if not isinstance(req, dict) or not isinstance(req.get("url"), str) or not isinstance(req.get("method"), str):
        raise UserError(f"{where} has no request.method and request.url; a HAR 1.2 entry has both")
    url, method = req["url"], req["method"].upper()
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError as e:  # an unclosed [IPv6 address]
        raise UserError(f"{where}: the URL {url!r} cannot be replayed ({e}); correct it in the HAR") from None
    if scheme not in ("http", "https") or method in _SKIPPED_METHODS:
        return None
    headers = []
    for h in req.get("headers") or []:
        if isinstance(h, dict) and isinstance(h.get("name"), str):
            headers.append((h["name"], str(h.get("value", ""))))
    if not any(n.lower() == "cookie" for n, _ in headers):
        cookies = [c for c in req.get("cookies") or [] if isinstance(c, dict) and c.get("name")]
        if cookies:
            headers.append(("Cookie", "; ".join(f"{c['name']}={c.get('value', '')}" for c in cookies)))
    status = (entry.get("response") or {}).get("status")
    statuses = [status] if isinstance(status, int) and status >= 100 else []
    return Request(method, url.split("#", 1)[0], headers, _body(req.get("postData"), where), statuses=statuses)


def _matches(origin: str, wanted: str) -> bool:
    """--origin HOST, HOST:PORT or SCHEME://HOST:PORT names `origin`."""
    w = wanted.lower().rstrip("/")
    if "://" in w:
        return origin == origin_of(w)
    hostport = origin.partition("://")[2]
    return w in (hostport, hostport.rsplit(":", 1)[0] if not hostport.endswith("]") else hostport)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def import_har(path: Path, *, include_assets: bool, origins: list[str], bodies_dir: str) -> Imported:
    """The scenario of the HAR file at `path` (see the module's docstring). `origins`: the origins to keep
    (host, host:port or scheme://host:port; '*' every one); none: the page's, that of the first request."""
    requests: list[Request] = []
    assets = 0
    for n, entry in enumerate(read_har(path), 1):
        r = _request(entry, n, str(path))
        if r is None:
            continue
        if not include_assets and is_asset(entry):
            assets += 1
            continue
        replayable(r)  # before its origin is read: a port above 65535 is a sentence, not a traceback
        requests.append(r)
    if not requests:
        why = f"all {assets} of its http(s) requests are static assets" if assets else "it has no http(s) request"
        fix = "; pass --include-assets to keep them" if assets else ""
        raise UserError(f"nothing to import from {str(path)!r}: {why}{fix}")
    seen = list(dict.fromkeys(origin_of(r.url) for r in requests))
    if "*" in origins:
        keep = seen
    elif origins:
        keep = [o for o in seen if any(_matches(o, w) for w in origins)]
        missing = [w for w in origins if not any(_matches(o, w) for o in seen)]
        if missing:
            raise UserError(
                f"--origin {missing[0]}: {str(path)!r} has no request to it; its origins are {', '.join(seen)}"
            )
    else:
        keep = seen[:1]
    notes = []
    if assets:
        notes.append(
            f"left out {_count(assets, 'static asset')} (images, stylesheets, scripts, fonts, media); "
            "--include-assets keeps them"
        )
    others = [o for o in seen if o not in keep]
    if others:
        left = sum(1 for r in requests if origin_of(r.url) in others)
        notes.append(
            f"left out {_count(left, 'request')} to {', '.join(others)}, not the page's origin {keep[0]}; "
            "--origin HOST keeps an origin (repeatable; --origin '*' keeps every one, a group each)"
        )
    kept = [r for r in requests if origin_of(r.url) in keep]
    imported = build(
        kept,
        name=path.stem,
        description=f"imported from the HAR recording {path.name}: {len(kept)} requests",
        by_origin=True,
        merge=True,
        bodies_dir=bodies_dir,
    )
    imported.notes[:0] = notes
    return imported
