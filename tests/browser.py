"""Headless Chromium driven over the DevTools protocol, for tests that watch a page change (the live page).

It reuses scripts/chromium-check.py's stdlib WebSocket client and its start and stop of Chromium (the flags this
sandbox needs: --headless --no-sandbox --disable-gpu --disable-background-networking …), and adds what a test of a
live page needs: open a URL, evaluate JavaScript, wait for a condition, close the page and open it again, take a
screenshot, and collect console errors.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import shutil
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _check_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chromium_check", REPO / "scripts" / "chromium-check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Browser:
    """One headless Chromium with one page; `close()` ends it and its helpers (their process group)."""

    def __init__(self, timeout_s: float = 120.0, width: int = 1100, height: int = 900) -> None:
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        assert chromium, "chromium is not installed: run `make ci-deps` (scripts/install-system-deps.sh)"
        self._cc = _check_module()
        self._profile = tempfile.mkdtemp(prefix="knee-chromium-")
        self._proc, port = self._cc._start(chromium, self._profile)
        self.timeout_s = timeout_s
        deadline = time.monotonic() + timeout_s
        self._ws = self._cc.WebSocket(self._cc._page_ws(port, deadline), timeout_s)
        self.page = self._cc.Page(self._ws, deadline)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.page.call(f"{domain}.enable")
        size = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.page.call("Emulation.setDeviceMetricsOverride", **size)

    def resize(self, width: int, height: int = 900, mobile: bool = False) -> None:
        """Lay the page out again at `width` × `height` CSS pixels (`mobile`: as a phone, honouring the page's
        viewport meta)."""
        size = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}
        self._call("Emulation.setDeviceMetricsOverride", **size)

    def _call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools call, with `timeout_s` from now (the checker's Page has one deadline for its whole life)."""
        self.page.deadline = time.monotonic() + self.timeout_s
        return self.page.call(method, **params)  # type: ignore[no-any-return]

    def open(self, url: str) -> None:
        """Navigate to `url` and wait for its load event."""
        self.page.events = [e for e in self.page.events if e["method"] != "Page.loadEventFired"]
        self._call("Page.navigate", url=url)
        self.page.wait_event("Page.loadEventFired")

    def eval(self, expression: str) -> Any:
        result = self._call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, expression: str, timeout_s: float = 30.0) -> Any:
        """The value of `expression` once it is truthy."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"{expression} was not true within {timeout_s} s")

    def screenshot(self, path: Path, full: bool = False) -> None:
        shot = self._call("Page.captureScreenshot", format="png", captureBeyondViewport=full)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions so far."""
        out = []
        for e in self.page.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif e["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                out.append(p["entry"].get("text", ""))
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.page.events if e["method"] == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            with contextlib.suppress(ConnectionError, OSError, TimeoutError, RuntimeError):
                self._call("Browser.close")
            self._ws.close()
        finally:
            self._cc._stop(self._proc)
            shutil.rmtree(self._profile, ignore_errors=True)
