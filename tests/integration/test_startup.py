"""What a `knee` process pays for before and after its load (issue 23, fixed cost): a quiet one-request run imports
neither rich nor importlib.metadata nor urllib.request, freezes what its imports made and still writes everything
it measured; knee's command line called in a caller's process leaves the caller's collector as it found it; the
console made on first use works wherever rich's own would (a Live display holds it with `with`).

The CPU these save is measured by `make bench` (docs/performance.md), not here."""

from __future__ import annotations

import gc
import io
import json
import platform
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.live import Live
from rich.text import Text

from knee.cli import main
from knee.console import _FirstUse, make_console
from knee.machine.host import identity

from servers import Nginx, start_nginx

# Runs knee's program as the `knee` script does, then says what the process imported and how its collector stands.
PROGRAM = textwrap.dedent(
    """
    import gc, json, sys, traceback
    class FirstRich:  # where rich was first imported from, to say why when it was
        stack = None
        def find_spec(self, name, path=None, target=None):
            if FirstRich.stack is None and name == "rich":
                FirstRich.stack = "".join(traceback.format_stack(limit=40))
            return None
    sys.meta_path.insert(0, FirstRich())
    from knee.cli import entry
    out = sys.argv.pop(1)
    code = 0
    try:
        entry()
    except SystemExit as exc:
        code = exc.code or 0
    with open(out, "w") as f:
        json.dump({"modules": sorted(sys.modules), "enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                   "code": code, "rich_from": FirstRich.stack}, f)
    """
)


def _knee_process(tmp_path: Path, *args: str) -> tuple[dict[str, object], subprocess.CompletedProcess[str]]:
    out = tmp_path / "process.json"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(out), *args],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    assert out.exists(), done.stderr
    return json.loads(out.read_text()), done


@pytest.fixture(scope="module")
def own_nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    """An nginx of this module's own: a connection another test left at the worker's shared one makes the run
    wait for the service to be at rest first, and say so on the console (which imports rich)."""
    server = start_nginx(tmp_path_factory.mktemp("startup-nginx"))
    yield server
    server.stop()


def test_a_quiet_one_request_run_imports_no_rich_no_metadata_no_urllib_and_counts_its_request(
    own_nginx: Nginx, tmp_path: Path
) -> None:
    nginx = own_nginx
    before = len(nginx.access_lines())
    seen, done = _knee_process(tmp_path, "run", nginx.url + "/", "-q", "-c", "1", "-n", "1", "--json", "r.json")
    assert seen["code"] == 0, done.stderr
    modules = set(seen["modules"])  # type: ignore[arg-type]
    assert {"knee.runner", "knee.model", "pydantic"} <= modules  # the run did run through knee
    rich = {m for m in modules if m == "rich" or m.startswith("rich.")}
    said = done.stdout.split("Target:", 1)[0].strip()  # what the run printed through the console, before its report
    why = f"rich imported from\n{seen['rich_from']}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    # On a busy machine nginx may not yet have accepted the preflight's own connection when the run looks for rest:
    # it waits, says "settled in …" through the console, and that use imports rich. Printing nothing, it must not.
    assert said.startswith("settled in ") if said else not rich, why
    assert "importlib.metadata" not in modules  # pydantic's plugin search (knee.cli._skip_pydantic_plugins)
    assert "urllib.request" not in modules  # the exporters' scraper: nothing to scrape
    assert seen["enabled"] is True
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 10_000  # the imports' objects, out of gc's way
    result = json.loads((tmp_path / "r.json").read_text())
    assert (result["succeeded"], result["failed"], result["hung"]) == (1, 0, 0)
    assert len(nginx.access_lines()) - before == 1  # what the server saw


def test_a_run_that_prints_through_the_console_still_prints(nginx: Nginx, tmp_path: Path) -> None:
    # A kept run directory is said through the console: it is made then, and prints as rich's own.
    seen, done = _knee_process(tmp_path, "run", nginx.url + "/", "-c", "1", "-d", "0.3s", "--out", "kept")
    assert seen["code"] == 0, done.stderr
    assert done.stdout.startswith("run directory: kept/")
    assert "rich.console" in seen["modules"]  # type: ignore[operator]
    assert "Complete operations" in done.stdout
    # its report drawn (report.html's figures) without numpy: a tenth of a CPU-second a run, on the load machine
    assert list((tmp_path / "kept").glob("*/report.html")), done.stdout
    assert "numpy" not in seen["modules"]  # type: ignore[operator]


def _call_main(*argv: str) -> None:
    try:
        main(list(argv))
    except SystemExit as exc:
        assert exc.code in (0, None)


def test_knee_main_in_a_callers_process_leaves_its_collector_as_it_was(capsys: pytest.CaptureFixture[str]) -> None:
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    _call_main("--version")  # no command imported: the pause ends with main
    assert "knee, version" in capsys.readouterr().out
    assert gc.isenabled()
    _call_main("run", "--help")  # a command imported: the pause ends there, nothing frozen in a caller's process
    assert "--clients" in capsys.readouterr().out
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
    gc.disable()
    try:  # a caller that turned the collector off keeps it off
        _call_main("run", "--help")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_console_made_on_first_use_is_rich_s_console_for_every_use() -> None:
    assert make_console(highlight=False).width > 0  # asking anything makes it
    sink = io.StringIO()
    console = _FirstUse(file=sink, force_terminal=True, width=60)
    with Live(Text("starting"), console=console, auto_refresh=False, transient=True) as live:  # type: ignore[arg-type]
        live.update(Text("running"), refresh=True)
    with console:  # what rich's Live and its stdout proxy do
        console.print("a sentence", highlight=False)
    assert "running" in sink.getvalue()
    assert "a sentence" in sink.getvalue()


def test_pydantic_s_plugin_loader_without_plugins_still_answers_for_the_rest_of_itself(tmp_path: Path) -> None:
    program = textwrap.dedent(
        """
        import sys
        from knee.cli import PLUGIN_LOADER, _skip_pydantic_plugins
        _skip_pydantic_plugins()
        import pydantic

        class M(pydantic.BaseModel):
            x: int = 0

        assert M(x=2).x == 2
        assert "importlib.metadata" not in sys.modules
        loader = sys.modules[PLUGIN_LOADER]
        assert list(loader.get_plugins()) == []
        assert loader.PYDANTIC_ENTRY_POINT_GROUP == "pydantic"  # any other name: the real loader's
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


def test_the_machine_s_platform_is_platform_s_own_text() -> None:
    # Said without the `uname -p` process platform.platform() starts on Linux.
    assert identity()["platform"] == platform.platform()


def test_main_in_a_callers_process_leaves_pydantic_s_plugins_alone() -> None:
    program = textwrap.dedent(
        """
        import sys
        from knee.cli import PLUGIN_LOADER, main
        main(["--version"])
        loader = sys.modules.get(PLUGIN_LOADER)
        print("stub" if loader is not None and "__file__" not in vars(loader) else "untouched")
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().endswith("untouched"), done.stdout + done.stderr
