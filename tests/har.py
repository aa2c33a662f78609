"""A HAR 1.2 document from the Network events headless Chromium emitted over the DevTools protocol.

Headless Chromium has no switch that writes a HAR file: "Export HAR" belongs to the DevTools front end, which turns
these same events into a HAR (as chrome-har and puppeteer-har do). This does the same for the tests: each
`Network.requestWillBeSent` is an entry with the headers Chromium actually sent (`requestWillBeSentExtraInfo`: the
Cookie header and the like are only there) and its post data, and `Network.responseReceived` its status and MIME
type.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qsl, urlsplit


def _headers(headers: dict[str, str]) -> list[dict[str, str]]:
    """DevTools joins repeated headers with newlines; a HAR lists each."""
    return [{"name": k, "value": v} for k, values in headers.items() for v in str(values).split("\n")]


def _post_data(request: dict[str, Any]) -> str | None:
    if "postData" in request:
        return str(request["postData"])
    entries = request.get("postDataEntries") or []
    if entries:
        return b"".join(base64.b64decode(e.get("bytes", "")) for e in entries).decode(errors="replace")
    return None


def har_of(
    events: list[dict[str, Any]], creator: str = "knee tests: Chromium DevTools Network events"
) -> dict[str, Any]:
    """The HAR of the requests in `events` (DevTools messages, in the order they came)."""
    sent: dict[str, dict[str, Any]] = {}
    extra: dict[str, dict[str, str]] = {}
    answered: dict[str, dict[str, Any]] = {}
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Network.requestWillBeSent":
            sent[p["requestId"]] = p
        elif method == "Network.requestWillBeSentExtraInfo":
            extra[p["requestId"]] = p["headers"]
        elif method == "Network.responseReceived":
            answered[p["requestId"]] = p["response"]
    entries = []
    for rid, p in sent.items():
        req, resp = p["request"], answered.get(rid, {})
        headers = extra.get(rid) or req.get("headers", {})
        post = _post_data(req)
        version = str(resp.get("protocol", "http/1.1")).upper()
        request: dict[str, Any] = {
            "method": req["method"],
            "url": req["url"],
            "httpVersion": version,
            "headers": _headers(headers),
            "queryString": [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(req["url"]).query)],
            "cookies": [],
            "headersSize": -1,
            "bodySize": len(post.encode()) if post is not None else 0,
        }
        if post is not None:
            ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
            request["postData"] = {"mimeType": ctype, "text": post}
        entries.append(
            {
                "startedDateTime": "1970-01-01T00:00:00.000Z",
                "time": 0,
                "request": request,
                "response": {
                    "status": resp.get("status", 0),
                    "statusText": resp.get("statusText", ""),
                    "httpVersion": version,
                    "headers": _headers(resp.get("headers", {})),
                    "cookies": [],
                    "content": {"size": 0, "mimeType": resp.get("mimeType", "")},
                    "redirectURL": "",
                    "headersSize": -1,
                    "bodySize": -1,
                },
                "cache": {},
                "timings": {"send": 0, "wait": 0, "receive": 0},
                "_resourceType": str(p.get("type", "")).lower(),
            }
        )
    return {"log": {"version": "1.2", "creator": {"name": creator, "version": "1"}, "pages": [], "entries": entries}}
