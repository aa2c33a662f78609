"""No silent skips where everything is installed: under `make test` (KNEE_NO_SKIPS=1) or in CI (CI set), a test
that skips fails instead, unless its name is in KNEE_ALLOWED_SKIPS (the Makefile's list, names separated by
spaces). `make test` installs what every test needs (`make ci-deps`, knee[dask], root for network namespaces), so a
skip there means a test that did not run while the summary said all was well.

A pytest plugin (tests/conftest.py loads it), kept apart so that tests/unit/test_no_skips.py can run it on tests of
its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

STRICT = "KNEE_NO_SKIPS"
ALLOWED = "KNEE_ALLOWED_SKIPS"


def _strict() -> bool:
    return os.environ.get(STRICT, "") not in ("", "0") or bool(os.environ.get("CI"))


def _allowed(nodeid: str) -> bool:
    names = os.environ.get(ALLOWED, "").split()
    test = nodeid.rsplit("::", maxsplit=1)[-1].split("[", maxsplit=1)[0]
    return any(name in (test, nodeid) for name in names)


def _reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail(report: Any) -> None:
    """Turn a skip into a failure that says why and what to do."""
    reason = _reason(report)
    report.outcome = "failed"
    report.longrepr = (
        f"{report.nodeid} skipped under {STRICT}/CI: {reason}\n"
        f"make test installs what the tests need (make ci-deps, knee[dask]): give this machine what the test needs, "
        f"or, if CI may skip it, add its name to {ALLOWED} in the Makefile"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and _strict() and not _allowed(report.nodeid):
        _fail(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    # a module that skips as a whole (pytest.importorskip at its top)
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _strict() and not _allowed(report.nodeid):
        _fail(report)
