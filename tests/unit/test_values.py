"""Option values in knee's words (knee.commands.values, knee.scenario.units.parse_list): the option, what it
takes, what was given."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from knee.commands.values import NUMBER, at_least, between, more_than, one_of
from knee.errors import UserError
from knee.scenario.units import parse_list


@click.command()
@click.option("-c", "--clients", type=at_least(1))
@click.option("--threads", type=at_least(0))
@click.option("--max-level", type=more_than(0))
@click.option("--ratio", type=between(0, 1))
@click.option("--alpha", type=NUMBER, default=0.05)
@click.option("--mode", type=one_of("echo", "session", "listen"))
def _cmd(**given: object) -> None:
    click.echo(repr(sorted(given.items())))


def _run(*args: str) -> click.testing.Result:
    return CliRunner().invoke(_cmd, list(args), standalone_mode=False, catch_exceptions=True)


@pytest.mark.parametrize(
    ("args", "value"),
    [
        (["-c", "1"], ("clients", 1)),
        (["--clients", "12"], ("clients", 12)),
        (["--threads", "0"], ("threads", 0)),
        (["--max-level", "0.5"], ("max_level", 0.5)),
        (["--ratio", "0"], ("ratio", 0.0)),
        (["--ratio", "1"], ("ratio", 1.0)),
        (["--alpha", "-3"], ("alpha", -3.0)),
        (["--mode", "listen"], ("mode", "listen")),
        ([], ("alpha", 0.05)),
    ],
)
def test_what_is_in_range_is_taken_as_a_number(args: list[str], value: tuple[str, object]) -> None:
    r = _run(*args)
    assert r.exception is None, r.exception
    assert repr(value) in r.output  # an int stays an int: ('clients', 1), not ('clients', 1.0)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["-c", "0"], "-c/--clients must be a whole number of at least 1 (got '0')"),
        (["-c", "1.5"], "-c/--clients must be a whole number of at least 1 (got '1.5')"),
        (["-c", "x"], "-c/--clients must be a whole number of at least 1 (got 'x')"),
        (["--threads", "-1"], "--threads must be a whole number of at least 0 (got '-1')"),
        (["--max-level", "0"], "--max-level must be a number above 0 (got '0')"),
        (["--max-level", "inf"], "--max-level must be a number above 0 (got 'inf')"),
        (["--ratio", "1.01"], "--ratio must be a number from 0 to 1 (got '1.01')"),
        (["--ratio", "-0.1"], "--ratio must be a number from 0 to 1 (got '-0.1')"),
        (["--alpha", "nan"], "--alpha must be a number (got 'nan')"),
        (["--mode", "Echo"], "--mode must be one of echo, session, listen (got 'Echo')"),
    ],
)
def test_what_is_out_of_range_is_one_sentence_naming_option_form_and_value(args: list[str], said: str) -> None:
    r = _run(*args)
    assert isinstance(r.exception, click.UsageError), r.output
    assert r.exception.format_message() == said


@pytest.mark.parametrize(
    ("value", "over_time", "said"),
    [
        ("100,x", "--rate-profile", "--rate '100,x': 'x' is not a number; use operations per second, e.g. 500 or "
         "100,200"),
        ("0s:10, 60s:400", "--rate-profile", "--rate '0s:10, 60s:400': '0s:10' is not a number; use operations per "
         'second, e.g. 500 or 100,200; a rate over time is --rate-profile, e.g. --rate-profile "0s:10, 60s:400"'),
        ("sine(mean=1)", "--ramp", "a rate over time is --ramp"),
        ("0s:10, 60s:400", None, "is not a number; use operations per second, e.g. 500 or 100,200"),
    ],
)  # fmt: skip
def test_a_rate_over_time_given_as_rates_names_the_option_that_takes_it(
    value: str, over_time: str | None, said: str
) -> None:
    with pytest.raises(UserError) as err:
        parse_list(value, "--rate", whole=False, over_time=over_time)
    assert said in str(err.value)
    assert ("over time" in str(err.value)) == (over_time is not None and (":" in value or "(" in value))


def test_rates_and_levels_that_are_numbers_are_taken() -> None:
    assert parse_list("100, 200/s", "--rates", whole=False, over_time="--ramp") == [100.0, 200.0]
    assert parse_list("auto", "--levels", whole=True, auto=True) == "auto"
    assert parse_list("5,20", "--levels", whole=True) == [5, 20]


def test_message_and_send_escapes_keep_every_other_character() -> None:
    from knee.scenario.oneline import Options, scenario_table

    typed = 'héllo\\n{"a": "x\\"y"}\\\\t'
    ws = scenario_table("ws://127.0.0.1:1/", Options(message=typed), run=False)  # type: ignore[call-arg]
    assert ws["groups"]["main"]["message"] == 'héllo\n{"a": "x\\"y"}\\t'
    tcp = scenario_table("tcp://127.0.0.1:1", Options(send="PING\\r\\n€"), run=False)  # type: ignore[call-arg]
    assert tcp["groups"]["main"]["send"] == "PING\r\n€"
