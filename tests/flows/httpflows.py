"""Flows of tests/integration/test_flow_http.py: ctx.http against nginx, and ctx.data."""

from __future__ import annotations

import asyncio


async def session(ctx) -> int:  # type: ignore[no-untyped-def]
    """Log in once per client (the server sets a cookie), then fetch /items with it, operation after operation."""
    if "in" not in ctx.session:
        r = await ctx.http.post("/login", json={"user": f"user{ctx.client}"})
        ctx.session["in"] = r.json()["ok"]
    r = await ctx.http.get("/items", name="items")
    assert r.json()["ok"] and r.headers["Content-Type"] == "application/json", r.text
    return len(r.body)


async def get(ctx) -> None:  # type: ignore[no-untyped-def]
    """One GET of the var `path` (default /)."""
    await ctx.http.get(ctx.vars.get("path", "/"))


async def idle_between(ctx) -> None:  # type: ignore[no-untyped-def]
    """A GET of /short (nginx closes its connection after 0.3 s idle), a rest of 0.6 s, the same GET again."""
    await ctx.http.get("/short")
    await asyncio.sleep(0.6)
    await ctx.http.get("/short")


async def judged(ctx) -> None:  # type: ignore[no-untyped-def]
    """/fail's 500 let through (expect=None), then judged by the flow itself with raise_for_status()."""
    r = await ctx.http.get("/fail", expect=None, name="fail")
    assert r.status == 500 and not r.ok and r.text == "broken on purpose\n"
    r.raise_for_status()


async def row_bytes(ctx) -> int:  # type: ignore[no-untyped-def]
    """The feeders' row as the operation's bytes: column `n` of feeder `users` (0 when no row)."""
    return int(ctx.data.get("users", {}).get("n", 0))


async def by_row(ctx) -> None:  # type: ignore[no-untyped-def]
    """A GET of /u/ID, ID from the operation's row of the data source `ids` (tests/integration/test_feeders.py)."""
    await ctx.http.get(f"/u/{ctx.data['ids']['id']}")
