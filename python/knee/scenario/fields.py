"""What every scenario table shares: the base model (unknown keys refused) and the field types typed by
users (durations like "10s", counts, rates)."""

import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from knee.scenario.units import MAX_DURATION, NEGATIVE, NOT_A_DURATION, DurationError, parse_duration


class DurationRefused(ValueError):
    """A field's duration refused, in pydantic's words (no key: pydantic names the field). `form` is true when the
    value is not a duration at all (a field that takes other forms too names those)."""

    def __init__(self, said: str, form: bool) -> None:
        super().__init__(said)
        self.form = form


def seconds(value: Any) -> Any:
    """A duration as typed ("10s", 2, "500ms") → seconds; anything else is left to the field's type (true, which a
    float would take as 1 s, is not a duration)."""
    if isinstance(value, bool | datetime.date | datetime.time):  # TOML reads 1979-05-27 and 07:32:00 as these
        raise DurationRefused(NOT_A_DURATION, form=True)
    if not isinstance(value, str | int | float):
        return value
    try:
        return parse_duration(value, "value")
    except DurationError as exc:
        if exc.form:
            raise DurationRefused(NOT_A_DURATION, form=True) from None
        if exc.why == NEGATIVE:
            raise DurationRefused(f"{NEGATIVE}: a duration is 0 or more, like 10s, 2m or 500ms", form=False) from None
        raise DurationRefused(f"must be a duration of at most {MAX_DURATION}", form=False) from None


Duration = Annotated[float, BeforeValidator(seconds), Field(ge=0)]
# A time something lasts that cannot be none (an operation's timeout, a stop's duration).
PositiveDuration = Annotated[float, BeforeValidator(seconds), Field(gt=0)]


def _auto_or_seconds(value: Any) -> Any:
    if value == "auto":
        return value
    try:
        out = seconds(value)
    except DurationRefused as exc:
        if not exc.form:
            raise
        raise ValueError(f'{NOT_A_DURATION}, or "auto"') from None
    if isinstance(out, float | int) and out <= 0:
        raise ValueError('must be a duration above 0, or "auto"')
    return out


# A duration, or "auto" (the level runs until its rate has settled: knee.analysis.steady).
DurationOrAuto = Annotated[float | Literal["auto"], BeforeValidator(_auto_or_seconds)]


def _precision(value: Any) -> Any:
    """`precision`: "10%" (a share of the level) or a number (in the level's unit: clients, or /s)."""
    text = str(value).strip() if isinstance(value, str | int | float) and not isinstance(value, bool) else ""
    try:
        number = float(text.removesuffix("%"))
    except ValueError:
        raise ValueError('must be a share of the level like "10%", or a number of clients (or /s) like 2') from None
    if not 0 < number < float("inf") or (text.endswith("%") and number >= 100):
        raise ValueError("must be above 0 (and a share below 100 %)")
    return text if text.endswith("%") else number


Precision = Annotated[str | float, BeforeValidator(_precision)]
# Counts (operations, clients, messages, bytes) are the engine's 64-bit integers: a larger one was refused there in
# its words ("invalid type: floating point `1e+23`, expected u64"), not the option's.
MAX_COUNT = 10**15
PositiveInt = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
# The most arrivals a second knee's engine can pace (crates/engine/src/pacer.rs MAX_RATE_HZ, which refuses more):
# one every 100 ns, what its schedule takes to issue one even when it drops it; past it a step overruns its duration.
MAX_RATE_HZ = 10_000_000.0


def _paced(rate: float) -> float:
    if rate > MAX_RATE_HZ:
        raise ValueError(
            f"must be at most {MAX_RATE_HZ:,.0f}/s, the most knee's engine can pace (an arrival every 100 ns): lower it"
        )
    return rate


PositiveRate = Annotated[float, Field(gt=0, allow_inf_nan=False), AfterValidator(_paced)]


class Table(BaseModel):
    """A table of a scenario file: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _framed_by_knee(headers: dict[str, str] | None) -> dict[str, str] | None:
    for name in headers or {}:
        if name.strip().lower() in ("content-length", "transfer-encoding"):
            raise ValueError(
                f"{name!r} is knee's to send: it frames each request's body itself (Content-Length from the body); "
                "drop the header"
            )
    return headers


# A request's own headers: not the ones that frame its body (a Content-Length that did not match the body made
# every operation wait for its timeout, or the next request on the connection misread).
Headers = Annotated[dict[str, str], AfterValidator(_framed_by_knee)]
