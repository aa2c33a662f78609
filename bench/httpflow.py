"""The Python flow of bench/flow_http_bench.py: one GET of / through `ctx.http` per operation, as Locust's
FastHttpUser in bench/locustfile.py does with `self.client.get("/")`."""


async def get(ctx) -> None:  # type: ignore[no-untyped-def]
    await ctx.http.get("/")
