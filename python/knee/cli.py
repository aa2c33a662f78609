"""knee's command line: one small module per subcommand under knee.commands."""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.machinery
import importlib.util
import os
import signal
import sys
import types
from typing import Any

import click

from knee import __version__
from knee.errors import UserError

# subcommand name -> module in knee.commands exposing `command: click.Command`
SUBCOMMANDS = {
    "run": "run",
    "sweep": "sweep",
    "soak": "soak",
    "demo": "demo",
    "target": "target",
    "report": "report",
    "compare": "compare",
    "fit": "fit",
    "doctor": "doctor",
    "import": "importcmd",
}


# Importing a subcommand builds some 80 pydantic models and a hundred thousand other objects, none of them garbage,
# which the cyclic collector would walk again and again: about an eighth of a one-request run's CPU
# (docs/performance.md, fixed cost). main() pauses it until the command is imported. In a process of knee's own
# (entry()), those objects are then frozen: no collection walks them again, the one at the process's exit included.
_paused = False
_own_process = False


def _pause_collection() -> None:
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def _collect_again() -> None:
    global _paused
    if _paused:
        if _own_process:  # not in a caller's process (tests call main()): its objects are not knee's to freeze
            gc.freeze()
        gc.enable()
        _paused = False


PLUGIN_LOADER = "pydantic.plugin._loader"


def _skip_pydantic_plugins() -> None:
    """knee's command line loads no pydantic plugins, as PYDANTIC_DISABLE_PLUGINS=__all__ would say, and does not
    look for any: looking imports importlib.metadata (and email) and reads every installed package's entry points
    when the first model is built, some 19 ms of every command's start (docs/performance.md, fixed cost). Whatever
    else pydantic asks of its plugin loader comes from the real one. Only in knee's own process (entry()): a
    program that imports knee, or calls main(), keeps its plugins."""
    if PLUGIN_LOADER in sys.modules:
        return
    loader = types.ModuleType(PLUGIN_LOADER, "pydantic's plugin loader, with no plugins (knee.cli)")

    def real(name: str) -> Any:
        if name.startswith("__"):  # the import system asks for __path__ and the like: a plain module has none
            raise AttributeError(name)
        plugin = importlib.import_module("pydantic.plugin")
        spec = importlib.machinery.PathFinder.find_spec(PLUGIN_LOADER, plugin.__path__)
        if spec is None or spec.loader is None:
            raise AttributeError(name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        loader.__getattr__ = lambda attr: getattr(module, attr)  # type: ignore[attr-defined]
        return getattr(module, name)

    loader.get_plugins = lambda: ()  # type: ignore[attr-defined]
    loader.__getattr__ = real  # type: ignore[attr-defined]
    sys.modules[PLUGIN_LOADER] = loader


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = SUBCOMMANDS.get(cmd_name)
        if module is None:
            return None
        command = importlib.import_module(f"knee.commands.{module}").command
        _collect_again()  # paused by main() while the command's modules were imported
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="knee")
def cli() -> None:
    """knee: drive a service with N concurrent clients and find where it hits the wall."""


def entry() -> None:
    """The `knee` program and `python -m knee`: main() in a process of knee's own."""
    global _own_process
    _own_process = True
    _skip_pydantic_plugins()
    try:
        main()
    finally:
        # Done: what knee had to write is written, its exit status decided. A Ctrl-C from here on (a second press
        # while the interpreter shuts down, which puts SIGINT's default action back) would end the process by the
        # signal instead of that status: ignored, which the shutdown leaves as it is.
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _click_error(exc: click.ClickException) -> str:
    """click's words, but for a missing argument: the command's usage; for a command that does not exist: the group's
    commands, and for `knee import FILE` the one the file's name points to."""
    said = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return said
    if isinstance(exc, click.MissingParameter):
        name = exc.param.human_readable_name if exc.param else "an argument"
        return f"{ctx.command_path} needs {name}: {ctx.get_usage().removeprefix('Usage: ')} (--help says more)"
    if not isinstance(ctx.command, click.Group) or not said.startswith("No such command"):
        return said
    names = sorted(ctx.command.list_commands(ctx))
    given = said.split("'")[1] if said.count("'") >= 2 else ""
    path = ctx.command_path
    if path.endswith(" import") and given.lower().endswith(".har"):
        return f"{path} takes the recording's kind first: {path} har {given}"
    import difflib

    close = difflib.get_close_matches(given, names, n=1)
    meant = f"did you mean {close[0]}? " if close else ""
    return f"{path} has no command {given!r}; {meant}its commands are {', '.join(names)} ({path} --help says more)"


class _PipeSafe:
    """stdout that outlives its reader: `knee sweep … | head -3` made the first print after head left raise
    BrokenPipeError, a traceback that stopped the sweep (run.json "failed"). The rest of the output goes to
    /dev/null and the run goes on: its files hold everything."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # what is still buffered, and the exit's flush, go there
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become one line on stderr and a non-zero exit, never a traceback."""
    # A shell starts background jobs of a script with SIGINT ignored, and Python keeps that. knee's
    # Ctrl-C contract (partial results kept, exit 130, no process left) holds however it was started;
    # detaching is what SIGHUP and nohup are for.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _pause_collection()
    stdout, sys.stdout = sys.stdout, _PipeSafe(sys.stdout)
    try:
        cli.main(args=argv, prog_name="knee", standalone_mode=False)
    except UserError as exc:
        click.echo(f"knee: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        # Commands that run load handle Ctrl-C themselves (partial report, exit 130); this
        # catches it anywhere else, e.g. while the subcommand's modules are still importing.
        click.echo("knee: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"knee: error: {_click_error(exc)}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        # The engine's typed errors (knee.EngineError and subclasses) are one sentence too; anything
        # else is a bug and keeps its traceback.
        engine = sys.modules.get("knee._engine")
        if engine is None or not isinstance(exc, engine.EngineError):
            raise
        click.echo(f"knee: error: {exc}", err=True)
        sys.exit(2)
    finally:
        sys.stdout = stdout
        _collect_again()
