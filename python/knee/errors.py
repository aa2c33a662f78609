"""User-facing errors: one sentence that names the key, the value and the fix."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user asked for (or a machine limit they must change).

    The CLI prints `knee: error: <message>` and exits with `exit_code`, never a traceback.
    """

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
