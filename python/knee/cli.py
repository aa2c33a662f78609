"""knee's command line: one small module per subcommand under knee.commands."""

from __future__ import annotations

import importlib
import signal
import sys

import click

from knee import __version__
from knee.errors import UserError

# subcommand name -> module in knee.commands exposing `command: click.Command`
SUBCOMMANDS = {
    "run": "run",
    "sweep": "sweep",
    "demo": "demo",
    "target": "target",
    "report": "report",
    "compare": "compare",
    "fit": "fit",
    "doctor": "doctor",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = SUBCOMMANDS.get(cmd_name)
        if module is None:
            return None
        return importlib.import_module(f"knee.commands.{module}").command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="knee")
def cli() -> None:
    """knee: drive a service with N concurrent clients and find where it hits the wall."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become one line on stderr and a non-zero exit, never a traceback."""
    # A shell starts background jobs of a script with SIGINT ignored, and Python keeps that. knee's
    # Ctrl-C contract (partial results kept, exit 130, no process left) holds however it was started;
    # detaching is what SIGHUP and nohup are for.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
        click.echo(f"knee: error: {exc.format_message()}", err=True)
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
