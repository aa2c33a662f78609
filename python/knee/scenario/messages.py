"""The wording of the scenario's errors: one sentence per mistake that names where (the file and line, or
the command-line option), the key, the value and the fix:

    scenario.toml line 12: groups.stress.clients must be at least 1 (got 0)

`describe` turns one pydantic error into that sentence; the other functions word the loading pipeline's own
mistakes (not TOML, an undefined placeholder, a misplaced secret) as UserErrors for the caller to raise.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knee.errors import UserError


@dataclass(frozen=True)
class Source:
    """Where a scenario came from, for error messages: a file's name and text (for line numbers), or the
    command line, whose keys are named by the options that set them."""

    name: str
    text: str = ""
    options: dict[str, str] | None = None  # scenario key -> the command-line option that sets it


def cannot_read(path: Path, exc: OSError) -> UserError:
    return UserError(f"cannot read scenario {str(path)!r}: {exc.strerror}; check the path")


def not_toml(source: str, exc: tomllib.TOMLDecodeError) -> UserError:
    m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
    where = f" line {m.group(1)}" if m else ""
    msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
    return UserError(f"{source}{where}: not valid TOML: {msg}")


def vars_not_a_table(source: Source) -> UserError:
    return UserError(f'{source.name} line {find_line(source.text, ("vars",))}: vars must be a table of name = "value"')


def secrets_not_names(source: Source) -> UserError:
    return UserError(f'{source.name}: secrets must be a list of names, e.g. secrets = ["token"]')


def undefined(source: Source, name: str, placeholder: str) -> UserError:
    """`${name}` (written `placeholder`) has no value."""
    line = next((i for i, ln in enumerate(source.text.splitlines(), 1) if placeholder in ln), None)
    where = f" line {line}" if line else ""
    return UserError(
        f"{source.name}{where}: ${{{name}}} is not defined; pass --var {name}=VALUE or add it under "
        f"[vars] (or --secret {name}=VALUE for a value knee must never write)"
    )


def secret_where_checked(source: Source, exc: ValidationError) -> UserError:
    """The recorded scenario (secrets as placeholders) fails where the one that runs passed."""
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"])
    return UserError(
        f"{source.name}: {key} holds a secret placeholder where the value is checked ({err['msg']}); "
        "use secrets in header, cookie, env, body and argv values only"
    )


def tls_file(source: Source, key: str, message: str) -> UserError:
    """A TLS file that cannot be used (knee.scenario.tlsfiles), named by its key (or the option that set it)."""
    return UserError(describe({"loc": tuple(key.split(".")), "msg": message, "type": "tls_file"}, source))


def at_key(source: Source, key: str, message: str) -> UserError:
    """A problem found after the values were read (a data file, a template naming a column), named by its key."""
    return UserError(describe({"loc": tuple(key.split(".")), "msg": message, "type": "value_error"}, source))


def invalid(source: Source, exc: ValidationError) -> UserError:
    """Every problem pydantic found, one sentence a line."""
    return UserError("\n".join(describe(e, source) for e in exc.errors()))


_KIND_TAGS = {"http", "tcp", "websocket", "grpc", "exec", "worker", "python"}


def describe(err: Any, source: Source) -> str:
    """One pydantic error as a sentence naming the key (or the option that set it), the value and the fix."""
    loc = [str(p) for p in err["loc"]]
    # drop the discriminator tag pydantic inserts (groups.<name>.http.url) and union branch names
    if len(loc) >= 3 and loc[0] == "groups" and loc[2] in _KIND_TAGS:
        del loc[2]
    if len(loc) >= 3 and loc[0] == "sweep" and loc[1] in ("levels", "rates") and loc[2] in ("list", "range", "auto"):
        if loc[2] == "auto":
            err = {**err, "type": "value_error", "msg": _levels_forms(loc[1])}
        del loc[2]
    key = "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc).lstrip(".")
    msg = _phrase(err)
    if source.options is not None:
        if len(loc) == 1 or (len(loc) == 2 and loc[0] == "groups"):
            # about a table or a group as a whole (options that clash): no one option to name, but the keys it
            # speaks of are said as the options that set them (min_duration: --min-duration)
            return _as_options(msg, loc, source.options)
        # the command line: name the option that set the key (or the key's own option, for a whole table)
        option = next((o for k, o in source.options.items() if key == k or key.startswith((k + ".", k + "["))), None)
        if option is None:
            option = next((o for k, o in source.options.items() if k.startswith(key + ".")), None) if key else None
        return (
            f"{option or key or source.name} {msg}"
            if msg.startswith(("must", "is ", "needs"))
            else (f"{option or key or source.name}: {msg}")
        )
    line = find_line(source.text, tuple(loc) if loc else tuple(msg.split()[0].split(".")))
    where = f"{source.name} line {line}" if line else source.name
    if not key:
        return f"{where}: {msg}"
    sep = " " if msg.startswith(("must", "is ", "needs", "kind")) else ": "
    return f"{where}: {key}{sep}{msg}"


def _as_options(msg: str, loc: list[str], options: dict[str, str]) -> str:
    """`msg`, about table or group `loc` as a whole, with the keys of it that it names (those with an underscore,
    and interval) said as the command line's options."""
    table = ".".join(loc) + "."
    for key, option in options.items():
        bare = key.removeprefix(table)
        if key.startswith(table) and "." not in bare and ("_" in bare or bare == "interval"):
            msg = re.sub(rf"(?<![\w-]){re.escape(bare)}(?![\w-])", option, msg)
    return msg


def _levels_forms(key: str) -> str:
    example = "[5, 20, 50]" if key == "levels" else "[100, 200, 500]"
    return f'must be a list like {example}, a range table {{start, stop, count}}, or "auto"'


def _phrase(err: Any) -> str:
    t = err["type"]
    ctx = err.get("ctx") or {}
    got = err.get("input")
    got_s = f" (got {got!r})" if not isinstance(got, dict | list) else ""
    if t == "missing":
        return "is required; add it"
    if t == "extra_forbidden":
        from knee.scenario.keys import closest

        loc = tuple(err["loc"])
        meant = closest(str(loc[-1]), loc) if loc else None
        if meant is not None:
            return f"is not a known key; did you mean {meant}?"
        return "is not a known key; check its spelling in docs/scenarios.md"
    if t in ("greater_than_equal", "greater_than"):
        word = "at least" if t == "greater_than_equal" else "more than"
        return f"must be {word} {_bound(ctx.get('ge', ctx.get('gt')))}{got_s}"
    if t in ("less_than_equal", "less_than"):
        word = "at most" if t == "less_than_equal" else "less than"
        return f"must be {word} {_bound(ctx.get('le', ctx.get('lt')))}{got_s}"
    if t == "string_pattern_mismatch":
        if "function" in [str(p) for p in err["loc"]]:
            return f"must be module:function, like flows:login{got_s}"
        return f"must be a name of letters, digits and '_' not starting with a digit{got_s}"
    if t == "literal_error":
        return f"must be {ctx.get('expected')}{got_s}"
    if t == "union_tag_invalid":
        return f"kind must be one of {ctx.get('expected_tags')} (got {ctx.get('tag')!r})"
    if t == "union_tag_not_found":
        return 'needs kind = "http", "tcp", "websocket", "grpc", "exec", "worker" or "python"'
    if t in ("int_type", "int_parsing", "int_from_float"):
        return f"must be a whole number{got_s}"
    if t in ("float_type", "float_parsing"):
        return f"must be a number{got_s}"
    if t == "finite_number":
        return f"must be a finite number{got_s}"
    if t == "string_type":
        return f"must be a string{got_s}"
    if t in ("bool_type", "bool_parsing"):
        return f"must be true or false{got_s}"
    if t == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    if t in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a table{got_s}"
    if t == "list_type":
        return f"must be a list{got_s}"
    msg = str(err.get("msg", "is not valid")).removeprefix("Value error, ")
    if t == "value_error" and msg.startswith("must"):
        return f"{msg}{got_s}"
    return msg


def _bound(value: Any) -> Any:
    """0.0 → 0 in messages (a float bound that is a whole number)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def find_line(text: str, loc: tuple[str, ...]) -> int | None:
    """The line where key `loc` is set, by scanning table headers and `key =` lines (tomllib keeps no positions)."""
    lines = text.splitlines()
    section: tuple[str, ...] = ()
    best: tuple[int, int] | None = None  # (matched depth, line number)
    header = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    assign = re.compile(r"^\s*([A-Za-z0-9_\-\".]+)\s*=")
    for n, line in enumerate(lines, 1):
        h = header.match(line)
        if h:
            section = tuple(p.strip().strip('"') for p in h.group(1).split("."))
            depth = _prefix_len(section, loc)
            if depth == len(section) and depth > 0 and (best is None or depth > best[0]):
                best = (depth, n)
            continue
        a = assign.match(line)
        if not a:
            continue
        full = section + tuple(p.strip().strip('"') for p in a.group(1).split("."))
        depth = _prefix_len(full, loc)
        if depth == len(full) and depth > 0 and (best is None or depth > best[0]):
            best = (depth, n)
    return best[1] if best else None


def _prefix_len(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
