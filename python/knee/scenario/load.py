"""The loading pipeline: TOML text, or the tables a one-line command builds, → the Scenario that runs, the
one that is recorded and the run's Secrets.

`read_scenario(text, source, variables, secrets)` parses TOML; `from_raw(tables, source, …)` fills `${name}`
placeholders from `[vars]`, the command line and the secrets, lifts credentials given literally into secrets
of their own, and validates both the scenario as it runs (every value filled in) and as it is recorded
(secrets as placeholders); `scenario_from_record` does it again for `--resume`. Every problem is a UserError
worded by `knee.scenario.messages`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knee.scenario import messages
from knee.scenario.messages import Source
from knee.scenario.model import Scenario
from knee.scenario.secrets import Secrets, lift_credentials, resolve, scenario_names

# Placeholders the engine (or the plan) fills in itself, left untouched here.
RUNTIME_PLACEHOLDERS = frozenset({"client", "iteration", "stage", "uuid", "now_ms"})
_PLACEHOLDER = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # $${NAME}: a literal ${NAME} (the engine's)


@dataclass(frozen=True)
class Loaded:
    """A scenario as it runs, and as it is written down."""

    scenario: Scenario  # every placeholder filled: what runs
    record: Scenario  # secrets (and credentials given literally) as ${placeholders}: what run.json keeps
    secrets: Secrets  # name -> value of every secret the run uses; scrubs what is written about the run
    source: Source | None = None  # where it came from: errors found later name its keys as its own did


Variables = dict[str, str] | None  # ${name} -> value (--var)
SecretValues = Mapping[str, str] | None  # name -> value of the secrets given (--secret, the environment)
SOURCE = "scenario.toml"  # what a scenario given as text is called in its errors


def load_scenario(path: Path, variables: Variables = None, secrets: SecretValues = None) -> Scenario:
    """Read, fill placeholders, validate. Every problem becomes a UserError naming the line and key."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise messages.cannot_read(path, exc) from exc
    return read_scenario(text, path.name, variables, secrets).scenario


def parse_scenario(
    text: str, source: str = SOURCE, variables: Variables = None, secrets: SecretValues = None
) -> Scenario:
    return read_scenario(text, source, variables, secrets).scenario


def read_scenario(text: str, source: str = SOURCE, variables: Variables = None, secrets: SecretValues = None) -> Loaded:
    """Parse TOML text into the scenario as it runs and as it is recorded."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise messages.not_toml(source, exc) from exc
    return from_raw(raw, Source(source, text), variables, secrets)


def from_raw(
    raw: dict[str, Any],
    source: Source,
    variables: dict[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
) -> Loaded:
    """Fill placeholders and validate a scenario's tables (from TOML, or built from the command line)."""
    file_vars = raw.get("vars", {})
    if not isinstance(file_vars, dict):
        raise messages.vars_not_a_table(source)
    declared = raw.get("secrets", [])
    if not isinstance(declared, list) or not all(isinstance(n, str) for n in declared):
        raise messages.secrets_not_names(source)
    values = {str(k): str(v) for k, v in file_vars.items()}
    values.update(variables or {})
    given = dict(secrets or {})
    secret_values = {**resolve([n for n in declared if n not in given], {}, f"{source.name} uses"), **given}
    run_raw = _substitute(raw, {**values, **secret_values}, source, keep=set())
    record_raw = _substitute(raw, values, source, keep=set(secret_values))
    if values:  # the effective [vars], command-line ones included (worker programs get them)
        run_raw["vars"] = record_raw["vars"] = dict(values)
    known = dict(secret_values)
    if isinstance(record_raw.get("groups"), dict) and isinstance(run_raw.get("groups"), dict):
        record_raw["groups"] = lift_credentials(record_raw["groups"], run_raw["groups"], known)
    lifted = {k: v for k, v in known.items() if k not in secret_values}
    names = list(dict.fromkeys([*declared, *given, *lifted]))
    if names:
        run_raw["secrets"] = record_raw["secrets"] = names
    scenario = _validate(run_raw, source)
    try:
        record = Scenario.model_validate(record_raw)
    except ValidationError as exc:
        raise messages.secret_where_checked(source, exc) from None
    return Loaded(scenario, record, Secrets({**secret_values, **lifted}, scenario_names(record_raw)), source)


def scenario_from_record(record: Scenario, secrets: Mapping[str, str] | None = None) -> Loaded:
    """The scenario a run was started with (run.json's), its secrets filled in again for `--resume`."""
    values = resolve(record.secrets, secrets or {}, "this run uses")
    raw = record.model_dump(mode="json", exclude_none=True)
    run_raw = _substitute(raw, values, Source("run.json"), keep=set(), strict=False)
    return Loaded(_validate(run_raw, Source("run.json")), record, Secrets(values, scenario_names(raw)))


def _validate(raw: dict[str, Any], source: Source) -> Scenario:
    """The scenario that runs, checked: its values, then the TLS files its https groups use (knee.scenario.tlsfiles)."""
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        raise messages.invalid(source, exc) from None
    from knee.scenario import data, grpcproto
    from knee.scenario.tlsfiles import TlsFileError, check

    try:
        check(scenario)
    except TlsFileError as exc:
        raise messages.tls_file(source, exc.key, exc.message) from None
    bad = data.check(scenario) or grpcproto.check(scenario)
    if bad is not None:
        raise messages.at_key(source, *bad)
    return scenario


def _substitute(value: Any, values: dict[str, str], source: Source, keep: set[str], strict: bool = True) -> Any:
    """Fill `${name}` from `values`; leave runtime placeholders and those in `keep` as they are. An undefined
    name is an error (`strict`) or left as it is."""
    if isinstance(value, dict):
        return {k: _substitute(v, values, source, keep, strict) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, values, source, keep, strict) for v in value]
    if isinstance(value, str):

        def repl(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in RUNTIME_PLACEHOLDERS or name in keep:
                return m.group(0)
            if name not in values:
                if not strict:
                    return m.group(0)
                raise messages.undefined(source, name, m.group(0))
            return values[name]

        return _PLACEHOLDER.sub(repl, value)
    return value
