"""`knee import har|curl|targets`: a recording of real traffic → a scenario (TOML) to edit and run.

The scenario goes to standard output, or to `-o FILE` (bodies too large or binary to inline beside it, in
`bodies/`); what was left out and the secrets to set go to standard error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from knee.commands.values import one_of

if TYPE_CHECKING:
    from knee.importers.build import Imported

OUT = click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the scenario to this file (default: standard output); large or binary bodies go to bodies/ beside it.",
)


@click.group(name="import", context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """Turn a recording into a scenario: a browser's HAR, a curl command, vegeta's targets.

    \b
    Examples:
      knee import har site.har -o site.toml && knee run site.toml -c 20 -d 30s
      knee import curl -o login.toml -- curl -u alice:s3cret -d user=alice http://127.0.0.1:8080/login
      knee import targets targets.txt -o mix.toml        (vegeta's http format; --format json)
    """


def _finish(imported: Imported, out: Path | None) -> None:
    from knee.importers.build import secrets_message, write

    text = write(imported, out)
    for note in imported.notes:
        click.echo(f"knee import: {note}", err=True)
    message = secrets_message(imported)
    if message:
        click.echo(f"knee import: {message}", err=True)
    if out is None:
        click.echo(text, nl=False)
    else:
        click.echo(f"knee import: scenario written to {out}; run it with: knee run {out} -c 10 -d 10s", err=True)


def _bodies(out: Path | None) -> str:
    from knee.importers.build import bodies_dir_for

    return bodies_dir_for(out)


@command.command(name="har", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@OUT
@click.option(
    "--include-assets", is_flag=True, help="Keep static assets too (images, stylesheets, scripts, fonts, media)."
)
@click.option(
    "--origin",
    "origins",
    multiple=True,
    metavar="HOST",
    help="Keep the requests to this origin (host, host:port or scheme://host:port; repeatable; '*' every one), a "
    "group each. Default: the page's origin, that of the first request.",
)
def har(file: Path, out: Path | None, include_assets: bool, origins: tuple[str, ...]) -> None:
    """A HAR 1.2 recording (DevTools: Network, Export HAR; or a proxy's) → a scenario: each distinct request once,
    weighted by how often it was recorded; cookies and credentials as secrets, never written."""
    from knee.importers.har import import_har

    _finish(import_har(file, include_assets=include_assets, origins=list(origins), bodies_dir=_bodies(out)), out)


@command.command(
    name="curl",
    context_settings={
        "help_option_names": ["-h", "--help"],
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
    },
)
@OUT
@click.argument("args", nargs=-1, type=click.UNPROCESSED, required=True)
def curl(out: Path | None, args: tuple[str, ...]) -> None:
    """A curl command → a scenario sending the request curl sends: knee import curl -- curl ARGS…

    \b
    Reads -X, -H, -d/--data, --data-raw, --data-binary, --data-urlencode, --json, -G, -I, -u, -b, -A, -e,
    --compressed, --oauth2-bearer, --url; -k, --cert, --key, --cacert, --capath, --http2, --tlsv1.3, --tls-max,
    --max-time, --connect-timeout; accepts -s, -S, -v, -i, -o, -w, -f, -L (what curl prints). Any other flag is
    refused by name. -u, -b and credential headers become secrets, never written."""
    from knee.importers.curl import import_curl

    _finish(import_curl(list(args), bodies_dir=_bodies(out)), out)


@command.command(name="targets", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@OUT
@click.option(
    "--format",
    "fmt",
    type=one_of("http", "json"),
    default="http",
    show_default=True,
    help="vegeta's targets format: http ('METHOD URL' lines, headers, @body) or json (one object a line).",
)
def targets(file: Path, out: Path | None, fmt: str) -> None:
    """A vegeta targets file → a scenario: each target a request of weight 1 (`--targets FILE` on knee run and
    knee sweep runs it without writing one)."""
    from knee.importers.targets import import_targets

    _finish(import_targets(file, fmt, bodies_dir=_bodies(out)), out)
