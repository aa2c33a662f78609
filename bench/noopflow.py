"""The no-op Python flow `make bench` runs through knee's Python worker: the worker's and the protocol's cost."""


async def noop(ctx) -> None:  # type: ignore[no-untyped-def]
    """Nothing."""
