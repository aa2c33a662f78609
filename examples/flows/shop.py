"""A Python flow using ctx.http (docs/worker-protocol.md#http-in-a-flow): each client logs in once, then fetches
a document with its session cookie, operation after operation; compare content.py, which speaks HTTP itself.

    export CONTENT_PASSWORD=…        # the worker processes inherit knee's environment
    knee run --python shop:login_and_fetch --path examples/flows -c 20 -d 30s --var target=http://127.0.0.1:8080

The service is `knee target` with a login (docs/demo-target.md, "Login sessions"). Requests go to the var
`target` (or `url`); each is timed as a step ("POST /login", "document"); a status outside 200–399 fails the
operation with class `status`. The user name comes from a feeder named `users` when the scenario has one.
"""

from __future__ import annotations

import os


async def login_and_fetch(ctx) -> int:  # type: ignore[no-untyped-def]
    if "user" not in ctx.session:  # once per client: the session cookie stays in ctx.http's cookie jar
        user = ctx.data.get("users", {}).get("name", f"user{ctx.client}")
        await ctx.http.post("/login", data={"user": user, "password": os.environ["CONTENT_PASSWORD"]})
        ctx.session["user"] = user
    r = await ctx.http.get(ctx.vars.get("path", "/files/doc"), name="document", expect=None)
    if r.status == 401:  # the server forgot the session: log in again next time
        del ctx.session["user"]
    r.raise_for_status()
    return len(r.body)
