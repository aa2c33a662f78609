"""Secrets: values knee uses but never writes.

A secret is a `${name}` placeholder whose value comes from `--secret name=VALUE`, `--secret name`
(the environment variable `name`) or the environment (a scenario's `secrets = ["name"]`). What knee
writes (run.json, scenario.toml in the run directory, every report, `--json`) keeps the placeholder,
never the value, and `--resume` asks for the value again by name.

Credential-bearing values given literally — the value of an `Authorization`, `Proxy-Authorization`
or `Cookie` header, of any header or exec environment variable named like a token, key, secret,
password or session, of every cookie, and an https group's `tls.password` (a client key's) — are made
secrets of their own (`main_header_authorization`, `main_tls_password` …): the run uses them, the files
hold the placeholder.

As a last line of defence every text knee writes goes through `Secrets.scrub`, which replaces any secret
value of 4 or more characters still found in it (an error message that echoed a token, say); JSON goes through
`Secrets.scrub_json`, which replaces them inside its strings only. A value that knee's own text holds too is left
alone, since replacing it would break what knee writes, not hide a credential: a number (`--secret pin=1000`), a
literal of JSON or TOML (a cookie `consent=true`), or a name the scenario gives (a cookie `tab=main` beside group
`main`). A run's
`Secrets` come from loading its scenario (`Loaded.secrets`) and are handed to whatever writes or prints
(the run directory, `--json`, `knee doctor`); nothing is kept in a process-wide registry.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from knee.errors import UserError

REDACTED = "<redacted>"
_SENSITIVE = re.compile(r"authorization|cookie|token|key|secret|passw|pwd|session|cred|auth", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MIN_SCRUB = 4


class Secrets(Mapping[str, str]):
    """The secrets one run uses, name -> value, and `scrub` for every text written or printed about it.
    Its repr names the secrets, never their values."""

    def __init__(self, values: Mapping[str, str] | None = None, names: Iterable[str] = ()) -> None:
        """`names`: the scenario's own (its groups', requests', keys'): values equal to one are not scrubbed."""
        self._values = dict(values or {})
        own = set(names)
        # the values `scrub` replaces, longest first (a value inside another is replaced after it)
        self._scrubbed = sorted(
            {v for v in self._values.values() if len(v) >= MIN_SCRUB and v not in own and not _structural(v)},
            key=len,
            reverse=True,
        )

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Secrets({sorted(self._values)})"

    def scrub(self, text: str) -> str:
        """`text` with every secret value (of MIN_SCRUB characters or more) replaced by <redacted>, longest first."""
        for v in self._scrubbed:
            if v in text:
                text = text.replace(v, REDACTED)
        return text

    def scrub_json(self, text: str, indent: int | None = None) -> str:
        """JSON `text` with every secret value (as `scrub`) replaced inside its strings, never in its keys, numbers
        or literals, so that it stays the JSON it was (a value with a quote or a backslash is found as decoded);
        written again compact, or indented by `indent`."""
        if not self._scrubbed:
            return text
        doc = self._walk(json.loads(text))
        out = json.dumps(doc, ensure_ascii=False, indent=indent, separators=None if indent else (",", ":"))
        return out + "\n" if text.endswith("\n") else out

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        return value


_LITERALS = frozenset({"true", "false", "null", "none", "nan", "inf", "infinity"})


def _structural(value: str) -> bool:
    """A value knee's own text is full of: a number or a JSON/TOML literal (scrubbing it would break the text)."""
    if value.strip().lower().lstrip("+-") in _LITERALS:
        return True
    try:
        float(value)
    except ValueError:
        return False
    return True


def scenario_names(raw: Any) -> set[str]:
    """The names a scenario's tables give (every key at any depth, and every `name` and `label`): a secret equal to
    one is not scrubbed (its group `main` would become `<redacted>`)."""
    out: set[str] = set()
    if isinstance(raw, dict):
        for k, v in raw.items():
            out.add(str(k))
            if k in ("name", "label") and isinstance(v, str):
                out.add(v)
            out |= scenario_names(v)
    elif isinstance(raw, list):
        for v in raw:
            out |= scenario_names(v)
    return out


NO_SECRETS = Secrets()


def sensitive(name: str) -> bool:
    """A header, cookie or environment variable name that carries credentials."""
    return bool(_SENSITIVE.search(name))


def parse_secret_options(items: tuple[str, ...] | list[str], option: str = "--secret") -> dict[str, str]:
    """`--secret name=VALUE` or `--secret name` (from the environment) → {name: value}."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not _NAME.match(name):
            raise UserError(
                f"{option} {item.split('=')[0]!r}: a secret's name is letters, digits and '_' (not starting with a "
                "digit), e.g. --secret token=VALUE"
            )
        if not sep:
            if name not in os.environ:
                raise UserError(
                    f"{option} {name}: ${name} is not set in the environment; export it or pass {option} {name}=VALUE"
                )
            value = os.environ[name]
        out[name] = value
    return out


def resolve(names: list[str], given: Mapping[str, str], why: str = "this run uses") -> dict[str, str]:
    """The values of secrets `names`: given on the command line, else from the environment."""
    out: dict[str, str] = {}
    for name in names:
        if name in given:
            out[name] = given[name]
        elif name in os.environ:
            out[name] = os.environ[name]
        else:
            raise UserError(f"{why} the secret {name!r}: pass --secret {name}=VALUE (or set {name} in the environment)")
    return out


def _uses_secret(value: str, secrets: Mapping[str, str] | dict[str, str]) -> bool:
    """`value` holds a placeholder of a known secret ("Bearer ${token}")."""
    return any(m.group(1) in secrets for m in _PLACEHOLDER.finditer(value))


# A value filled in per operation (a data source's column, ${client} …): not a credential given literally.
_TEMPLATE = re.compile(
    r"\$\{(?:[A-Za-z_][A-Za-z0-9_]*\.[^}]*|client|iteration|uuid|now_ms|random_int\([^}]*\)|random_string\([^}]*\))\}"
)


def _lifted(g: dict[str, Any], filled_group: dict[str, Any], prefix: str, secrets: dict[str, str]) -> dict[str, Any]:
    """`g`'s headers, cookies and env with their credentials given literally made secrets named after `prefix`."""
    for field, word, every in (("headers", "header", False), ("cookies", "cookie", True), ("env", "env", False)):
        table = g.get(field)
        if not isinstance(table, dict):
            continue
        filled = filled_group.get(field) or {}
        new = {}
        for key, value in table.items():
            if (
                isinstance(value, str)
                and value
                and (every or sensitive(str(key)))
                and not _uses_secret(value, secrets)
                and not _TEMPLATE.search(value)
            ):
                name = re.sub(r"[^A-Za-z0-9_]", "_", f"{prefix}_{word}_{key}").lower()
                secrets[name] = str(filled.get(key, value))
                new[key] = f"${{{name}}}"
            else:
                new[key] = value
        g[field] = new
    return g


def lift_credentials(record: dict[str, Any], run: dict[str, Any], secrets: dict[str, str]) -> dict[str, Any]:
    """Credential-bearing literal values in the groups of `record` (raw scenario tables, secrets still
    as placeholders) become placeholders of new secrets, whose values (from `run`, the same tables
    filled in) are added to `secrets`. A value that uses a secret already ("Bearer ${token}") stays.
    Returns the record's new group tables."""
    out: dict[str, Any] = {}
    for gname, table_of_group in record.items():
        if not isinstance(table_of_group, dict):
            out[gname] = table_of_group
            continue
        g = _lifted(dict(table_of_group), run.get(gname, {}), gname, secrets)
        # a request mix's requests carry headers and cookies of their own
        requests, filled = g.get("requests"), run.get(gname, {}).get("requests")
        if isinstance(requests, list) and isinstance(filled, list) and len(filled) == len(requests):
            g["requests"] = [
                _lifted(dict(r), f if isinstance(f, dict) else {}, f"{gname}_{r.get('name', i)}", secrets)
                if isinstance(r, dict)
                else r
                for i, (r, f) in enumerate(zip(requests, filled, strict=True))
            ]
        tls = g.get("tls")
        password = tls.get("password") if isinstance(tls, dict) else None
        literal = isinstance(password, str) and password and not _uses_secret(password, secrets)
        if isinstance(tls, dict) and literal:
            name = re.sub(r"[^A-Za-z0-9_]", "_", f"{gname}_tls_password").lower()
            secrets[name] = str(run.get(gname, {}).get("tls", {}).get("password", password))
            g["tls"] = {**tls, "password": f"${{{name}}}"}
        out[gname] = g
    return out
